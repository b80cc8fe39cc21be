"""The learning demonstration: held-out pass rate against training time, async and sync, over
several training seeds, against the base model's pass@k.

Prints tables and writes ``--out``/learning.json and ``--out``/learning.png (with matplotlib).
Asserts nothing. Run (defaults: SmolLM2-135M, ``shell-warmup`` and ``shell-lookup`` easy,
``bash-compact`` with two responses of 48 tokens, 60 minutes, 3 seeds x async and sync):

    .venv/bin/python benchmarks/bench_learning.py --device cuda      # 6 x 60 min, one process
    .venv/bin/python benchmarks/bench_learning.py --minutes 5 --seeds 0 --variants async \\
        --eval-tasks 4 --base-k 2 --group-size 4 --groups-per-step 1 --concurrency 8 \\
        --eval-every 150 --out runs/learning-smoke                  # a smoke run on a CPU

What it does:

1. **Tasks held out by construction** (:mod:`palaestra.tasks.generators.splits`): training
   tasks are the families' ``--tier`` at seeds ``[0, --train-tasks)`` (training split), the
   evaluation tasks ``--eval-tasks`` per family at seeds from 100000 (evaluation split: other
   words, names and paths, and kinds never trained on). It refuses to run, in one line, when an
   evaluation instruction occurs among the training ones (``--eval-first-seed`` moves them).
2. **Control**: the base model on the evaluation tasks, greedy (every run's step 0) and
   ``--base-k`` samples at the training temperature (pass@k: does training teach a new skill,
   or sharpen what sampling already finds?).
3. **Runs**: for each seed and variant (``async``: one stream, episodes keep running while a
   step trains, ``max_staleness`` versions at most; ``sync``: each step's groups run to the
   end, then the step), :class:`~palaestra.rl.trainer.GRPOTrainer` trains for ``--minutes`` of
   wall time, saving the weights every ``--eval-every`` seconds of training; afterwards each
   saved version is evaluated greedily on the evaluation tasks (the wall-time axis is training
   time only).

The JSON holds every run's points (step, version, updates, minutes, held-out rate per kind and
per family), its lag (the most versions any trained sample was behind), updates, staleness
drops and admission waits, throughput; the base control; and the summary: per variant the
final rate's mean over seeds with its 95 % t-interval, the gain over the base model, whether it
beats the base pass@k, and async - sync with a Welch interval.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from learning_report import kind_of, plot, rates, summarise, summary_lines

from palaestra.llm import SamplingParams
from palaestra.llm.local_hf import HFLocalPolicy
from palaestra.rl import Uniform
from palaestra.rl.trainer import GRPOConfig, GRPOTrainer, StepStats, train
from palaestra.run import evaluate
from palaestra.scaffolds import make_scaffold
from palaestra.tasks import generators
from palaestra.tasks.generators.splits import HELD_OUT_FIRST_SEED, overlapping_instructions
from palaestra.tasks.source import TaskSet


def scaffold(args: argparse.Namespace, temperature: float) -> Any:
    sampling = SamplingParams(max_tokens=args.max_tokens, temperature=temperature)
    return make_scaffold(args.scaffold, step_limit=args.step_limit, sampling=sampling)


def task_sets(args: argparse.Namespace) -> tuple[TaskSet, TaskSet]:
    """The training and evaluation tasks (lazy sets; ids only)."""
    families = args.families.split(",")
    train_set = generators.pack(
        families_=families, tiers=(args.tier,), seeds=range(args.train_tasks)
    )
    first = args.eval_first_seed
    eval_set = generators.pack(
        families_=families, tiers=(args.tier,), seeds=range(first, first + args.eval_tasks)
    )
    return train_set, eval_set


async def held_out(
    policy: HFLocalPolicy,
    args: argparse.Namespace,
    tasks: TaskSet,
    kinds: dict[str, str],
    *,
    temperature: float,
    attempts: int = 1,
) -> dict[str, Any]:
    """Pass rates on the evaluation tasks (per kind and family, pass@k for k <= attempts)."""
    records: list[dict[str, Any]] = []
    await evaluate(
        "gen",
        policy,
        tasks=tasks,
        scaffold=scaffold(args, temperature),
        concurrency=args.concurrency,
        attempts=attempts,
        on_episode=lambda r: records.append(r) if r.get("final", 1) else None,
    )
    return rates(records, kinds)


def new_policy(args: argparse.Namespace, seed: int) -> HFLocalPolicy:
    return HFLocalPolicy(
        args.model.removeprefix("hf:"), device=args.device, seed=seed, max_batch_size=args.max_batch
    )


async def run_variant(
    mode: str,
    seed: int,
    args: argparse.Namespace,
    train_ids: list[str],
    eval_set: TaskSet,
    kinds: dict[str, str],
    base: dict[str, Any],
) -> dict[str, Any]:
    snapshots = args.out / f"snapshots-{mode}-{seed}"
    snapshots.mkdir(parents=True, exist_ok=True)
    points: list[dict[str, Any]] = []
    history: list[StepStats] = []
    paused = 0.0  # seconds spent saving weights, taken off the training clock
    async with new_policy(args, seed) as policy:
        trainer = GRPOTrainer(policy, GRPOConfig(lr=args.lr, temperature=args.temperature))
        await trainer.load()
        import torch

        def snapshot(stats: StepStats | None) -> None:
            nonlocal paused
            t0 = time.perf_counter()
            path = snapshots / f"step-{len(history)}.pt"
            if stats is not None:
                torch.save(trainer.policy_state(), path)
            points.append(
                {
                    "step": len(history),
                    "version": policy.policy_version,
                    "updates": trainer.updates,
                    "wall_s": t0 - started - paused,
                    "path": path if stats is not None else None,
                }
            )
            paused += time.perf_counter() - t0

        def on_step(stats: StepStats) -> None:
            history.append(stats)
            print(
                f"  [{mode} {seed}] step {stats.step} v{stats.version} reward "
                f"{stats.mean_reward:.2f} lag {stats.lag} entropy {stats.entropy:.2f} "
                f"kl {stats.kl or 0:.4f} clip {stats.clip_fraction:.3f}",
                flush=True,
            )
            if time.perf_counter() - started - paused - points[-1]["wall_s"] >= args.eval_every:
                snapshot(stats)

        started = time.perf_counter()
        snapshot(None)  # step 0: the base model, evaluated once for every run (greedy)
        await train(
            trainer,
            "gen",
            steps=10**9,
            time_limit_s=args.minutes * 60,
            group_size=args.group_size,
            groups_per_step=args.groups_per_step,
            mode=mode,
            max_staleness=args.max_staleness,
            seed=seed,  # type: ignore[arg-type]
            sampler=Uniform(train_ids),
            scaffold=scaffold(args, args.temperature),
            concurrency=args.concurrency,
            on_step=on_step,
        )
        train_wall = time.perf_counter() - started - paused
        if history and history[-1].step != points[-1]["step"]:
            snapshot(history[-1])
        for point in points:  # evaluation, after training, on the held-out tasks
            path = point.pop("path")
            if path is None:
                result = base["greedy"]
            else:
                await policy.load_weights(torch.load(path), version=point["version"])
                result = await held_out(policy, args, eval_set, kinds, temperature=0.0)
            point.update(
                held_out_pass_rate=result["pass_rate"],
                per_kind=result["per_kind"],
                per_family=result["per_family"],
            )
            print(f"  [{mode} {seed}] eval step {point['step']}: {result['pass_rate']:.3f}")
    shutil.rmtree(snapshots, ignore_errors=True)
    stream = history[-1].stream if history else None
    updated = [s for s in history if s.updated]  # steps with no signal measure nothing
    trained_s = sum(s.train_s for s in history)
    return {
        "mode": mode,
        "seed": seed,
        "points": points,
        "steps": len(history),
        "updates": trainer.updates,
        "max_lag": max((s.lag for s in history), default=0),
        "lags": [s.lag for s in history],
        "train_wall_s": train_wall,
        "s_per_step": train_wall / len(history) if history else None,
        "generated_tokens_per_s": sum(s.generated_tokens for s in history) / train_wall,
        "trained_tokens_per_s": sum(s.tokens for s in history) / trained_s if trained_s else None,
        "dropped_stale": stream.dropped_stale if stream else 0,
        "admission_waits": stream.admission_waits if stream else 0,
        "final_entropy": updated[-1].entropy if updated else None,
        "final_kl": updated[-1].kl if updated else None,
    }


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=60.0, help="training wall time per run")
    p.add_argument("--model", default="hf:smollm2-135m")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--families", default="shell-warmup,shell-lookup")
    p.add_argument("--tier", default="easy", choices=generators.TIERS)
    p.add_argument("--variants", default="async,sync")
    p.add_argument("--seeds", default="0,1,2", help="training seeds, comma-separated")
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--groups-per-step", type=int, default=2)
    p.add_argument("--max-staleness", type=int, default=1)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--max-batch", type=int, default=8, help="the policy's batch (GPU: 64)")
    p.add_argument("--train-tasks", type=int, default=200, help="seeds per family")
    p.add_argument("--eval-tasks", type=int, default=100, help="seeds per family (>= 200 tasks)")
    p.add_argument("--eval-first-seed", type=int, default=HELD_OUT_FIRST_SEED)
    p.add_argument("--base-k", type=int, default=8, help="samples per task for the control")
    p.add_argument("--eval-every", type=float, default=600.0, help="seconds of training")
    p.add_argument("--scaffold", default="bash-compact", help="bash-compact: short prompts")
    p.add_argument("--step-limit", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--temperature", type=float, default=0.3, help="sampling while training")
    p.add_argument("--out", type=Path, default=Path("runs/bench-learning"))
    p.add_argument(
        "--replot",
        type=Path,
        nargs="+",
        metavar="JSON",
        help="only merge these learning.json files (runs made as separate "
        "processes) into --out/learning.json and .png",
    )
    args = p.parse_args()
    if not args.replot and not args.model.startswith("hf:"):
        p.error(
            f"--model {args.model!r}: the trainer trains a local model, hf:<dir|file.gguf|name>"
        )
    args.variant_list = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not args.variant_list or set(args.variant_list) - {"async", "sync"}:
        p.error(f"--variants {args.variants!r}: a comma-separated list of async and sync")
    try:
        args.seed_list = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        p.error(f"--seeds {args.seeds!r}: comma-separated integers, e.g. 0,1,2")
    return args


def report(result: dict[str, Any], out: Path) -> None:
    result["summary"] = summarise(result["runs"], result["base"])
    print(f"\n{'variant':<7} {'seed':>4} {'step':>5} {'train min':>9} {'held-out':>9}")
    for run in result["runs"]:
        for point in run["points"]:
            print(
                f"{run['mode']:<7} {run['seed']:>4} {point['step']:>5} "
                f"{point['wall_s'] / 60:>9.1f} {point['held_out_pass_rate']:>9.3f}"
            )
    for run in result["runs"]:
        print(
            f"{run['mode']} seed {run['seed']}: {run['steps']} steps, {run['updates']} updates, "
            f"max lag {run['max_lag']}, {run['s_per_step'] or 0:.1f} s/step, dropped stale "
            f"{run['dropped_stale']}, admission waits {run['admission_waits']}"
        )
    print("\n".join(summary_lines(result["summary"])))
    out.mkdir(parents=True, exist_ok=True)
    (out / "learning.json").write_text(json.dumps(result, indent=2, default=str))
    a = result["args"]
    print(
        plot(
            result["runs"],
            result["base"],
            out / "learning.png",
            f"{a['model']} on {a['families']} ({a['tier']}), held out",
        )
    )


async def main() -> None:
    args = parse()
    if args.replot:
        saved = [json.loads(path.read_text()) for path in args.replot]
        merged = {
            "args": saved[0]["args"],
            "base": saved[0]["base"],
            "kinds": saved[0]["kinds"],
            "runs": [run for s in saved for run in s["runs"]],
        }
        report(merged, args.out)
        return
    train_set, eval_set = task_sets(args)
    train_tasks = await asyncio.to_thread(list, train_set)
    eval_tasks = await asyncio.to_thread(list, eval_set)
    overlap = overlapping_instructions(train_tasks, eval_tasks)
    if overlap:
        print(
            f"error: {len(overlap)} evaluation instructions occur among the training tasks "
            f"(e.g. {overlap[0].splitlines()[-1]!r}); a held-out figure needs disjoint tasks: "
            f"leave --eval-first-seed at {HELD_OUT_FIRST_SEED}",
            file=sys.stderr,
        )
        sys.exit(2)
    if len(eval_tasks) < 200:
        print(f"note: {len(eval_tasks)} evaluation tasks, fewer than the 200 a claim needs")
    kinds = {
        t.id: kind_of(
            generators.parse_task_id(t.id)[0], t.instruction, t.config.metadata.get("tags", [])
        )
        for t in [*train_tasks, *eval_tasks]
    }
    trained_kinds = {kinds[t.id] for t in train_tasks}
    held_out_kinds = sorted({kinds[t.id] for t in eval_tasks} - trained_kinds)
    print(
        f"{len(train_tasks)} training and {len(eval_tasks)} evaluation tasks; kinds never "
        f"trained on: {held_out_kinds}",
        flush=True,
    )
    async with new_policy(args, 0) as policy:
        base = {
            "greedy": await held_out(policy, args, eval_set, kinds, temperature=0.0),
            "sampled": await held_out(
                policy, args, eval_set, kinds, temperature=args.temperature, attempts=args.base_k
            ),
        }
    print(
        f"base: greedy {base['greedy']['pass_rate']:.3f}, pass@k at {args.temperature:g}: "
        f"{ {k: round(v, 3) for k, v in base['sampled']['pass_at_k'].items()} }",
        flush=True,
    )
    runs = []
    train_ids = list(train_set.ids)
    for seed in args.seed_list:
        for mode in args.variant_list:
            print(f"{mode} seed {seed}: training {args.minutes:g} min", flush=True)
            runs.append(await run_variant(mode, seed, args, train_ids, eval_set, kinds, base))
    args_json = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    report(
        {"args": args_json, "base": base, "kinds": {"held_out": held_out_kinds}, "runs": runs},
        args.out,
    )


if __name__ == "__main__":
    asyncio.run(main())
