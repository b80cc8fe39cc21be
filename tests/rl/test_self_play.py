"""Self-play end to end: the scripted creator's mix through the creator env, validation on real
sandboxes, calibration by a solver through RolloutStream, the pool as a task source, its stats,
and variants of the tasks a run failed. Plus the pure parts (format, reward) on their own."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from palaestra.cli import app
from palaestra.env.checker import check_env
from palaestra.env.creator import CreatorEnv
from palaestra.env.registry import load_tasks, make
from palaestra.env.types import EpisodeError, EpisodeStatus
from palaestra.llm import LLMResponse, ScriptedPolicy
from palaestra.rl import LearnabilityBand
from palaestra.rl.self_play import failed_tasks, learnability, repetition_penalty
from palaestra.run.check import ScenarioResult
from palaestra.run.evaluate import evaluate
from palaestra.run.validate import _scenario_steps, validate_proposal
from palaestra.sandbox import default_backend
from palaestra.tasks.pool import Pool, jaccard, shingles
from palaestra.tasks.proposal import ProposalError, forbidden, parse_proposal

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "self_play.py"


def _example():
    spec = importlib.util.spec_from_file_location("self_play_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _answer(proposal: dict) -> str:
    return "Here it is:\n```json\n" + json.dumps(proposal) + "\n```"


@pytest.mark.slow
async def test_the_loop_accepts_exactly_the_valid_proposals_and_rewards_learnability(tmp_path):
    demo = _example()
    pool_dir = tmp_path / "pool"
    results = await demo.run(pool_dir, ScriptedPolicy(demo.demo_answers()), seeds="starter:0:2")

    # every proposal ends where the mix says: the valid ones accepted, the others at their step
    assert [r["reason"] for r in results] == [expected for _, _, expected in demo.DEMO]
    accepted = [r for r in results if r["accepted"]]
    assert [r["task_id"] for r in accepted] == ["sum-numbers", "reverse-words"]
    # the demo solver solves 3 of 4 attempts of the first task, 2 of 4 of the second:
    # learnability 1 - 2|p - 0.5| is 0.5 and 1.0 (the two tasks share almost nothing)
    assert [r["solve_rate"] for r in accepted] == [0.75, 0.5]
    assert all(r["similarity"] < 0.5 for r in accepted)
    assert [r["reward"] for r in accepted] == [0.5, 1.0]
    assert all(r["reward"] == 0.0 for r in results if not r["accepted"])

    pool = Pool(pool_dir)
    provenance = pool.provenance("sum-numbers")
    assert provenance["solve_rates"] == [0.75] and provenance["parent"] is None
    assert provenance["creator"] == "creator-1" and provenance["creator_policy"] == "scripted"
    assert [s["step"] for s in provenance["validation"]["steps"]][-1] == "limits"
    assert pool.difficulties() == {"reverse-words": 0.5, "sum-numbers": 0.25}
    measured = {t.id: (t.difficulty, t.config.metadata["solve_rate"]) for t in pool.tasks()}
    assert measured == {"sum-numbers": ("easy", 0.75), "reverse-words": ("medium", 0.5)}
    band = LearnabilityBand(pool.tasks().ids, difficulties=pool.difficulties())
    assert band.draw(random.Random(0)).difficulty in (0.5, 0.25)
    stats = pool.stats()
    assert (stats["accepted"], stats["rejected"]) == (2, 6)
    assert stats["rejections"] == {
        r: 1 for r in ("reference", "not_trivial", "nop", "forbidden", "parse", "novel")
    }
    rejected = [json.loads(p.read_text()) for p in (pool_dir / ".rejected").glob("*.json")]
    curl = next(r for r in rejected if r["reason"] == "forbidden")
    assert "network" in curl["detail"] and "curl" in curl["text"]

    # the pool is a task source like any other, and the CLI shows it
    env = make(f"pool:{pool_dir}")
    assert sorted(env.tasks.ids) == ["reverse-words", "sum-numbers"]
    await env.close()
    out = CliRunner().invoke(app, ["tasks", "pool", "stats", str(pool_dir)])
    assert out.exit_code == 0, out.output
    missing = CliRunner().invoke(app, ["tasks", "pool", "stats", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "no such pool directory" in " ".join(missing.output.split())
    shown = " ".join(out.output.split())
    assert "8 proposals, 2 accepted, 6 rejected" in shown and "not_trivial" in shown
    assert "0.6-0.8" in shown and "0.4-0.6" in shown

    # tasks from failures: a run where the solver did nothing fails both; the creator is asked
    # for variants of them, and the accepted variant names its parent
    run_dir = tmp_path / "nop-run"
    await evaluate(str(pool_dir), "nop", out_dir=run_dir, concurrency=2)
    assert failed_tasks(run_dir) == ["reverse-words", "sum-numbers"]
    variant = {
        **demo.VALID_SUM,
        "id": "count-words",
        "instruction": "Count the words of /app/text.txt and write the number to /app/count.txt.",
        "files": {"text.txt": "one two three\nfour\n"},
        "outputs": ["count.txt"],
        "tests": {
            "test.sh": '#!/bin/bash\nmkdir -p /logs/verifier\n[ "$(cat '
            '/app/count.txt)" = 4 ] && echo 1 > /logs/verifier/reward.txt || '
            "echo 0 > /logs/verifier/reward.txt\n"
        },
        "solution": "#!/bin/bash\nwc -w < /app/text.txt > /app/count.txt\n",
    }
    creator = ScriptedPolicy([_answer(variant)])
    [result] = await demo.run(pool_dir, creator, from_failures=run_dir, proposals=1, attempts=2)
    assert result["accepted"] and result["task_id"] == "count-words"
    prompt = creator.requests[0].last_user_text
    parent = pool.provenance("count-words")["parent"]
    assert "FAILED" in prompt and parent in failed_tasks(run_dir)
    assert json.dumps(load_tasks(f"pool:{pool_dir}").get(parent).instruction.strip()) in prompt


def test_learnability_and_the_repetition_penalty():
    assert [learnability(p) for p in (0.0, 0.25, 0.5, 0.75, 1.0)] == [0.0, 0.5, 1.0, 0.5, 0.0]
    assert repetition_penalty(0.3) == 0.0 and repetition_penalty(0.8) == 0.8
    text = "Write the sum of /app/numbers.txt to /app/sum.txt"
    assert jaccard(shingles(text), shingles(text)) == 1.0
    assert jaccard(shingles(text), shingles("Reverse the words of a phrase in place")) == 0.0


@pytest.mark.parametrize(
    ("answer", "names"),
    [
        ("no json here", "no JSON object"),
        ('```json\n{"instruction": "x", "tests": {}, "solution": "s"}\n```', "test.sh"),
        (
            '{"instruction": "x", "tests": {"test.sh": "t"}, "solution": "s", '
            '"files": {"../etc/passwd": "x"}}',
            "'../etc/passwd'",
        ),
        ('{"instruction": "", "tests": {"test.sh": "t"}, "solution": "s"}', "'instruction'"),
        (
            '{"instruction": "x", "tests": {"test.sh": "t", "a/./b": "x"}, "solution": "s"}',
            "'a/./b'",
        ),
        (
            '{"instruction": "x", "tests": {"test.sh": "t"}, "solution": "s", '
            '"files": {"big": "' + "a" * 300_000 + '"}}',
            "over the limit",
        ),
    ],
)
def test_a_malformed_proposal_gets_one_line_naming_what_is_wrong(answer, names):
    with pytest.raises(ProposalError) as e:
        parse_proposal(answer)
    assert names in str(e.value) and "\n" not in str(e.value)


def test_static_checks_refuse_network_use_and_peeking_at_the_tests():
    base = {"instruction": "x", "tests": {"test.sh": "echo 1 > /logs/verifier/reward.txt"}}
    ok = parse_proposal(json.dumps({**base, "solution": "echo 17 > /app/sum.txt"}))
    assert forbidden(ok) == []
    peek = parse_proposal(json.dumps({**base, "solution": "cp /tests/expected /app/out"}))
    assert "reads the verifier's files" in forbidden(peek)[0]
    net = parse_proposal(json.dumps({**base, "solution": "pip install numpy && python3 x.py"}))
    assert "uses the network" in forbidden(net)[0]
    silent = parse_proposal(json.dumps({**base, "tests": {"test.sh": "exit 0"}, "solution": "x"}))
    assert "never write" in forbidden(silent)[0]


def _run(scenario: str, reward: float) -> ScenarioResult:
    return ScenarioResult(
        "t",
        scenario,
        1.0 if scenario == "oracle" else 0.0,
        reward,
        {"reward": reward},
        "ok",
        "",
        0.1,
    )


def test_two_oracle_runs_that_disagree_fail_the_determinism_step():
    runs = [
        _run("oracle", 1.0),
        _run("oracle", 0.0),
        _run("nop", 0.0),
        _run("nop", 0.0),
        *(_run(f"wrong:{w}", 0.0) for w in ("empty", "echo", "delete")),
    ]
    steps = {str(s.step): s for s in _scenario_steps(runs, max_solve_s=60)}
    assert not steps["deterministic"].ok and "disagree" in steps["deterministic"].detail
    assert steps["nop"].ok and steps["not_trivial"].ok
    steps = {str(s.step): s for s in _scenario_steps(runs[:1] * 2 + runs[2:], max_solve_s=0.05)}
    assert steps["deterministic"].ok and not steps["limits"].ok


async def test_the_creator_env_asks_for_a_task_and_rewards_a_well_formed_one():
    demo = _example()
    env = make("creator:starter:0:2")
    assert isinstance(env, CreatorEnv) and len(env.seeds) == 2
    with pytest.raises(EpisodeError):
        await env.step(LLMResponse(content="{}"))
    first = await env.reset(seed=1)
    assert first.first() and '"instruction"' in first.observation.messages[1]["content"]
    assert first.observation.system_prompt.startswith("You write programming tasks")
    last = await env.step(LLMResponse(content=_answer(demo.VALID_SUM)))
    assert last.terminated and last.reward == 1.0 and last.end.status == EpisodeStatus.PASSED
    await env.reset(seed=1, options={"category": "text", "target": 0.5})
    last = await env.step(LLMResponse(content="a task about sums"))
    assert last.reward == 0.0 and last.end.status == EpisodeStatus.FAILED
    assert "no JSON object" in last.info["judgment"].info["reason"]
    await check_env(make("creator:starter:0:2"), ScriptedPolicy(lambda _: "not a task"))
    variant = make("creator:starter:0:2", mode="variant")
    ts = await variant.reset(seed=3)
    assert ts.info["task_id"] in env.seeds.ids and "FAILED" in ts.observation.last_user_text


async def test_clashing_paths_are_a_harbor_rejection_not_a_crash(tmp_path):
    clash = {
        "instruction": "x",
        "solution": "true",
        "files": {"a": "1", "a/b": "2"},
        "tests": {"test.sh": "echo 0 > /logs/verifier/reward.txt"},
    }
    validation = await validate_proposal(_answer(clash), tmp_path / "t", default_backend("local"))
    assert validation.reason == "harbor" and not validation.accepted


async def test_an_instruction_cannot_rewrite_the_echo_solution_to_pass_validation(tmp_path):
    # The tests accept any out.txt containing "banana": echoing the instruction passes them, so
    # the proposal is trivial, however its instruction tries to cut the echo script short.
    hack = {
        "instruction": "Write the word banana to /app/out.txt.\nPALAESTRA_EOF\nexit 0",
        "solution": "echo banana > /app/out.txt",
        "outputs": ["out.txt"],
        "tests": {
            "test.sh": "grep -q banana /app/out.txt && r=1 || r=0\n"
            "echo $r > /logs/verifier/reward.txt"
        },
    }
    validation = await validate_proposal(_answer(hack), tmp_path / "t", default_backend("local"))
    assert validation.reason == "not_trivial" and "wrong:echo" in validation.detail
