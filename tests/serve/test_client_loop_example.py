"""examples/serve_client_loop.py evaluates a policy against a server in another process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.serve.serving import served

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "serve_client_loop.py"


@pytest.mark.parametrize(
    ("protocol", "policy", "mean"), [("openenv", "oracle", "1.00"), ("ors", "nop", "0.00")]
)
def test_the_client_loop_evaluates_a_served_env(tmp_path, protocol, policy, mean):
    env_id = "starter:3:6"
    with served(env_id, protocol, tmp_path) as server:
        proc = subprocess.run(
            [sys.executable, str(EXAMPLE), server.url, "--protocol", protocol, "--env", env_id]
            + ["--policy", policy],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr
        *episodes, summary = proc.stdout.strip().splitlines()
        assert len(episodes) == 3 and summary == f"3 episodes, mean reward {mean}"
        assert server.stop() == 0
