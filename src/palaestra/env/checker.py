"""``check_env``: does an environment keep the policy-boundary contract?

Runs real episodes and raises :class:`ConformanceError` listing every broken rule: FIRST has
reward and discount None; every time step, LAST included, has an :class:`LLMRequest`
observation whose first message is the system prompt; MID has reward 0.0 and discount 1.0; LAST
has a float reward, discount 0.0 or 1.0, and ``info["end"]``, an :class:`EpisodeEnd` agreeing
with it (same reward, truncated exactly when the discount is 1.0); ``info`` names the episode
and task; step after LAST raises; the same seed picks the same task and gives the same first
observation (what Gymnasium's own ``check_env`` asserts); close is idempotent.
"""

from __future__ import annotations

from typing import Any

from palaestra.env.end import EpisodeEnd
from palaestra.env.types import Environment, EpisodeError, StepType, TimeStep
from palaestra.llm.client import LLMClient
from palaestra.llm.types import LLMRequest, LLMResponse
from palaestra.scaffolds.oracle import NopPolicy


class ConformanceError(AssertionError):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("environment breaks the contract:\n- " + "\n- ".join(problems))


def _check_step(ts: TimeStep[Any], problems: list[str], where: str) -> None:
    if ts.step_type is StepType.FIRST:
        if ts.reward is not None or ts.discount is not None:
            problems.append(f"{where}: FIRST must have reward and discount None")
    elif ts.step_type is StepType.MID:
        if ts.reward != 0.0 or ts.discount != 1.0:
            problems.append(f"{where}: MID must have reward 0.0 and discount 1.0")
    else:
        if not isinstance(ts.reward, float) or ts.discount not in (0.0, 1.0):
            problems.append(f"{where}: LAST needs a float reward and discount 0.0 or 1.0")
        end = ts.info.get("end")
        if not isinstance(end, EpisodeEnd):
            problems.append(f"{where}: LAST info['end'] must be an EpisodeEnd")
        elif end.reward != ts.reward or end.truncated != ts.truncated:
            problems.append(f"{where}: info['end'] disagrees with the reward or discount")
    obs = ts.observation
    if not isinstance(obs, LLMRequest):
        problems.append(f"{where}: observation is {type(obs).__name__}, not LLMRequest")
    elif not obs.messages or obs.messages[0].get("role") not in ("system", "user"):
        problems.append(f"{where}: the first message must be the system prompt (or user)")
    for key in ("episode_id", "task_id"):
        if key not in ts.info:
            problems.append(f"{where}: info lacks {key!r}")


async def check_env(
    env: Environment[LLMRequest, LLMResponse], policy: LLMClient | None = None, seed: int = 0
) -> None:
    """Run two seeded episodes and the misuse cases; raise ConformanceError on any breach."""
    policy = policy or NopPolicy()
    problems: list[str] = []
    tasks: list[str] = []
    firsts: list[Any] = []
    for attempt in range(2):
        ts = await env.reset(seed=seed)
        if ts.step_type is not StepType.FIRST:
            problems.append("reset must return FIRST")
        tasks.append(ts.info.get("task_id", ""))
        firsts.append(ts.observation)
        steps = 0
        while not ts.last():
            _check_step(ts, problems, f"episode {attempt} step {steps}")
            assert ts.observation is not None
            ts = await env.step(await policy.complete(ts.observation))
            steps += 1
        _check_step(ts, problems, f"episode {attempt} LAST")
        try:
            await env.step(LLMResponse(content=""))
            problems.append("step after LAST must raise EpisodeError")
        except EpisodeError:
            pass
    if tasks[0] != tasks[1]:
        problems.append(f"reset(seed={seed}) picked {tasks[0]!r}, then {tasks[1]!r}")
    elif firsts[0] != firsts[1]:
        problems.append(
            f"reset(seed={seed}) gave two different first observations: an observation must be "
            "a function of the seed and the task (put per-episode ids in info)"
        )
    await env.close()
    await env.close()
    if problems:
        raise ConformanceError(problems)
