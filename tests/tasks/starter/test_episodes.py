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
    """A command that unpacks the task's solution/ to /solution (its solve.sh also as
    reference.sh, where a wrong solution finds it), then runs ``script``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(PACK_DIR / task_id / "solution", arcname=".")
    packed = base64.b64encode(buf.getvalue()).decode()
    return (
        "mkdir -p /solution && base64 -d <<'EOF_SOLUTION' | tar -xz -C /solution\n"
        f"{packed}\nEOF_SOLUTION\ncp /solution/solve.sh /solution/reference.sh\nset -e\n{script}"
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


async def test_tasks_check_runs_the_pack_s_wrong_solutions() -> None:
    """``palaestra tasks check starter`` runs the wrong solutions the pack ships: one built on
    the reference (its reference.sh, added by the cache copy) must score 0; a partial-credit
    task's wrong solutions pass the check below 1."""
    from palaestra.run.check import check_tasks

    near_miss = TASKS.get("optimization-hard-access-log-report")
    partial = TASKS.get("data-querying-easy-library-loans")
    assert (near_miss.path / "wrong_solutions/misses-client-list/reference.sh").is_file()
    results = await check_tasks([near_miss, partial], only=["wrong"], concurrency=2)
    got = {(r.task_id.rsplit("/", 1)[-1], r.scenario): r for r in results}
    assert {s for _, s in got} == {
        *(f"wrong:{n}" for n in WRONG_SOLUTIONS["optimization-hard-access-log-report"]),
        *(f"wrong:{n}" for n in WRONG_SOLUTIONS["data-querying-easy-library-loans"]),
    }
    for (task_id, scenario), r in got.items():
        assert r.ok and r.status == "ok", (task_id, scenario, r.detail[-1500:])
        assert r.below_one == (task_id == "data-querying-easy-library-loans")
    assert any(0 < r.reward < 1 for r in results if r.below_one), "no partial score was seen"
