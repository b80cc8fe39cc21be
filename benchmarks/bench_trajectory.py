"""Token bookkeeping benchmark: the per-turn cost of building token-exact trajectories, against
the cost of one environment step, in the same run.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_trajectory.py``.

1. ``to_trajectories`` on synthetic episodes with realistic sizes: a first prompt of
   ``--prompt`` tokens, then every turn a completion of ``--completion`` tokens and an
   observation of ``--observation`` tokens, for 10, ``--turns`` and 2x ``--turns`` turns (each
   turn's prompt is its own list, as policies return them). The prefix check makes a turn's cost
   grow with the sequence so far, so the figure is given per turn and per token of prompt
   checked. Also ``collate`` and ``group_advantages`` for a group of 8 such episodes.
2. One ``env.step`` on the real local sandbox with an instant policy (``true`` as the command)
   on the starter pack's first task: what the bookkeeping is compared with.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time

from headline import headline

import palaestra
from palaestra.env import EpisodeEnd, EpisodeStatus
from palaestra.llm import LLMRequest, LLMResponse
from palaestra.rl.advantages import group_advantages
from palaestra.rl.trajectory import collate, to_trajectories
from palaestra.run.rollout import Episode, Turn
from palaestra.scaffolds import make_scaffold
from palaestra.scaffolds.base import EndReason

VOCAB = 49_152  # SmolLM2's


def synthetic_episode(
    rng: random.Random, turns: int, prompt: int, completion: int, observation: int
) -> Episode:
    def tokens(n: int) -> list[int]:
        return [rng.randrange(VOCAB) for _ in range(n)]

    request = LLMRequest(messages=[{"role": "user", "content": "task"}])
    sequence = tokens(prompt)
    out: list[Turn] = []
    for t in range(turns):
        if t:
            sequence = sequence + tokens(observation)
        written = tokens(completion)
        action = LLMResponse(
            content="x",
            prompt_token_ids=list(sequence),
            completion_token_ids=written,
            logprobs=[-1.0] * completion,
            policy_version=0,
        )
        out.append(Turn(request, action))
        sequence = sequence + written
    end = EpisodeEnd(EpisodeStatus.FAILED, EndReason.SUBMITTED, reward=rng.random())
    return Episode(out, end, terminated=True)


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bookkeeping(args: argparse.Namespace) -> float:
    rng = random.Random(0)
    print(
        f"to_trajectories: first prompt {args.prompt} tokens, +{args.completion} completion "
        f"and +{args.observation} observation tokens a turn (best of {args.repeat})"
    )
    per_turn_at_default = 0.0
    for turns in sorted({10, args.turns, 2 * args.turns}):
        episode = synthetic_episode(rng, turns, args.prompt, args.completion, args.observation)
        seconds = best_of(lambda e=episode: to_trajectories(e), args.repeat)
        checked = sum(len(t.action.prompt_token_ids) for t in episode.turns)
        final = len(episode.turns[-1].action.prompt_token_ids) + args.completion
        us_turn = seconds / turns * 1e6
        if turns == args.turns:
            per_turn_at_default = us_turn
        print(
            f"  {turns:>4} turns, final length {final:>7}: {seconds * 1e3:8.2f} ms an episode, "
            f"{us_turn:8.1f} us a turn, {seconds / checked * 1e9:6.2f} ns a prompt token"
        )
    group = [
        to_trajectories(
            synthetic_episode(rng, args.turns, args.prompt, args.completion, args.observation)
        )
        for _ in range(8)
    ]
    samples = [s for result in group for s in result]
    adv_s = best_of(lambda: group_advantages(group, "grpo"), args.repeat)
    rows = group_advantages(group, "grpo")
    col_s = best_of(lambda: collate(samples, pad_id=0, advantages=rows), args.repeat)
    tokens = sum(len(s) for s in samples)
    print(
        f"  group of 8 x {args.turns} turns ({tokens} tokens): group_advantages "
        f"{adv_s * 1e3:.2f} ms, collate {col_s * 1e3:.2f} ms"
    )
    return per_turn_at_default


async def env_step(steps: int) -> list[float]:
    """Seconds per ``env.step`` on the local sandbox, the policy answering instantly."""
    scaffold = make_scaffold("bash", step_limit=steps + 1)
    action = LLMResponse(content="```bash\ntrue\n```")
    async with palaestra.make("starter:0", scaffold=scaffold) as env:
        await env.reset(seed=0)
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            ts = await env.step(action)
            times.append(time.perf_counter() - start)
            if ts.last():
                break
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--prompt", type=int, default=2000, help="first prompt, tokens")
    parser.add_argument("--completion", type=int, default=200, help="tokens a turn")
    parser.add_argument("--observation", type=int, default=300, help="tokens a turn")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--steps", type=int, default=30, help="env steps to time")
    args = parser.parse_args()
    per_turn_us = bookkeeping(args)
    steps = asyncio.run(env_step(args.steps))
    step_us = statistics.median(steps) * 1e6
    print(
        f"env.step on the local sandbox (instant policy, `true`): median {step_us / 1e3:.2f} ms "
        f"over {len(steps)} steps"
    )
    print(
        f"bookkeeping at {args.turns} turns: {per_turn_us:.1f} us a turn = "
        f"{per_turn_us / step_us:.2%} of one env step"
    )
    headline(
        "trajectory",
        bookkeeping_us_per_turn=round(per_turn_us, 1),
        step_share=round(per_turn_us / step_us, 4),
    )


if __name__ == "__main__":
    main()
