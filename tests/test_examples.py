"""The shipped examples run as a user would run them."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.slow
def test_rl_loop_example_solves_its_episodes():
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "rl_loop.py")], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 3 and all("reward 1.0 (terminated, passed)" in line for line in lines)


@pytest.mark.slow
def test_stream_groups_example_prints_every_kept_group_with_its_advantages():
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "stream_groups.py")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    *groups, summary = proc.stdout.strip().splitlines()
    completed, filtered = (int(word) for word in summary.split() if word.isdigit())
    assert completed == 4 and len(groups) == completed - filtered
    for line in groups:  # each kept group has both outcomes, and GRPO advantages sum to zero
        rewards = ast.literal_eval(line.split("rewards ")[1].split(" advantages")[0])
        advantages = ast.literal_eval(line.split("advantages ")[1])
        assert len(rewards) == 4 and 0.0 in rewards and 1.0 in rewards
        assert abs(sum(advantages)) < 0.05


@pytest.mark.slow
def test_self_play_example_runs_its_demo_mix():
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "self_play.py")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    *proposals, shares = proc.stdout.strip().splitlines()
    assert [line.split()[0] for line in proposals].count("accepted") == 2 and len(proposals) == 8
    assert "accepted sum-numbers solve rate 0.75: creator reward 0.50" in proposals
    assert shares.startswith("shares: accepted 25%")


@pytest.mark.slow
def test_grpo_cpu_example_trains_a_step(tmp_path):
    """One step with a tiny random model (SmolLM2 itself is the default; too slow for CI)."""
    from palaestra.llm.local_hf import write_tiny_model

    model = write_tiny_model(tmp_path / "tiny")
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "grpo_cpu.py"), "--model", f"hf:{model}", "--steps", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.strip().splitlines()
    assert line.startswith("step 1: mean reward ") and "tokens trained" in line
