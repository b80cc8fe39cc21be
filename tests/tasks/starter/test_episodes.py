"""The starter pack's tasks as real episodes: nop scores 0, oracle 1, wrong solutions less."""

from __future__ import annotations

import base64
import io
import tarfile

import pytest

from palaestra import CodeEnv
from palaestra.llm import ScriptedPolicy
from palaestra.run import rollout
from palaestra.scaffolds import NopPolicy, OraclePolicy
from tests.conftest import SUBMIT_ACTION, bash_action
from tests.tasks.starter.pack import (
    HOSTILE,
    PACK_DIR,
    PARTIAL_CREDIT,
    TASK_IDS,
    TASKS,
    WRONG_SOLUTIONS,
)

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier


def with_solution(script: str, task_id: str) -> str:
    """A command that unpacks the task's solution/ to /solution, then runs ``script``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(PACK_DIR / task_id / "solution", arcname=".")
    packed = base64.b64encode(buf.getvalue()).decode()
    return (
        "mkdir -p /solution && base64 -d <<'EOF_SOLUTION' | tar -xz -C /solution\n"
        f"{packed}\nEOF_SOLUTION\nset -e\n{script}"
    )


async def run_episode(task_id: str, policy) -> tuple[float, dict]:
    async with CodeEnv(TASKS) as env:
        episode = await rollout(env, policy, options={"task_id": task_id})
    end = episode.end
    output = end.verifier.output if end.verifier is not None else ""
    log = f"status={end.status} error={end.error}\n{output[-4000:]}"
    assert end.status != "error", log
    return episode.reward, dict(episode.info, verifier_output=output)


SCENARIOS = (
    [(t, "nop") for t in TASK_IDS]
    + [(t, "oracle") for t in TASK_IDS]
    + [(t, f"wrong:{name}") for t in TASK_IDS for name in WRONG_SOLUTIONS.get(t, {})]
)


@pytest.mark.parametrize(("task_id", "scenario"), SCENARIOS, ids=[f"{t}-{s}" for t, s in SCENARIOS])
async def test_scenario(task_id: str, scenario: str) -> None:
    if scenario == "nop":
        reward, info = await run_episode(task_id, NopPolicy())
        assert reward == 0, f"the untouched workspace must score 0, got {reward}"
    elif scenario == "oracle":
        reward, info = await run_episode(task_id, OraclePolicy.from_tasks(TASKS))
        assert reward == 1, f"the reference solution must score 1, got {reward}: {info['end']}"
    else:
        script = WRONG_SOLUTIONS[task_id][scenario.removeprefix("wrong:")]
        policy = ScriptedPolicy([bash_action(with_solution(script, task_id)), SUBMIT_ACTION])
        reward, info = await run_episode(task_id, policy)
        applied = info["executions"][0]
        # a solution (reference or deliberately wrong) that does not even apply proves nothing
        assert applied["exit_code"] == 0, f"the wrong solution failed to apply: {applied}"
        if (task_id, scenario.removeprefix("wrong:")) in HOSTILE:
            out = info["verifier_output"]
            assert "ran out of" not in out and "before writing a reward" not in out, out[-2000:]
            assert reward == 0, f"a hostile solution must score 0, got {reward}"
        elif task_id in PARTIAL_CREDIT:
            assert reward < 1, f"a wrong solution must not get full credit, got {reward}"
        else:
            assert reward == 0, f"a wrong solution must score 0, got {reward}"
