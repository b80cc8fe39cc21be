"""Metrics over a run's final episodes: the numbers ``palaestra eval`` prints and reports show.

An episode record here is a row of the store's ``episodes`` table (see
:mod:`palaestra.run.store`): its ``status`` an :class:`~palaestra.env.types.EpisodeStatus`, its
``end_reason`` an :class:`~palaestra.scaffolds.base.EndReason`. Pass rates count every final
episode in the denominator: an errored episode is not passed, and the error rate is reported
next to it.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from palaestra.env.types import EpisodeStatus

TIERS = ("easy", "medium", "hard")
NO_GROUP = "—"
PHASES = ("sandbox_start_s", "agent_s", "policy_s", "verifier_s", "wall_s")
#: How many of a run's errors the summary quotes in full (``first_errors``).
FIRST_ERRORS = 3

Record = dict[str, Any]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): ``1 - C(n-c, k) / C(n, k)``.

    The chance that at least one of ``k`` samples drawn without replacement from ``n`` attempts,
    ``c`` of them correct, is correct. Computed as a product, never with huge binomials.
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def pass_at_ks(records: Iterable[Record]) -> dict[int, float]:
    """pass@k for every k up to the smallest number of attempts of a task, averaged over tasks."""
    per_task: dict[str, list[bool]] = defaultdict(list)
    for r in records:
        per_task[r["task_id"]].append(r["status"] == EpisodeStatus.PASSED)
    if not per_task:
        return {}
    k_max = min(len(v) for v in per_task.values())
    return {
        k: statistics.fmean(pass_at_k(len(v), sum(v), k) for v in per_task.values())
        for k in range(1, k_max + 1)
    }


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by linear interpolation, as numpy's default."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _rates(records: list[Record]) -> dict[str, Any]:
    n = len(records)
    passed = sum(r["status"] == EpisodeStatus.PASSED for r in records)
    errors = sum(r["status"] == EpisodeStatus.ERROR for r in records)
    return {
        "episodes": n,
        "passed": passed,
        "errors": errors,
        "pass_rate": passed / n if n else 0.0,
        "error_rate": errors / n if n else 0.0,
        "mean_reward": statistics.fmean(r["reward"] for r in records) if n else 0.0,
    }


def group_rates(records: list[Record], key: str) -> dict[str, dict[str, Any]]:
    """Rates per value of ``key`` (tiers in easy, medium, hard order; no value as "—")."""
    groups: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        groups[r.get(key) or NO_GROUP].append(r)
    order = {tier: i for i, tier in enumerate(TIERS)}
    names = sorted(groups, key=lambda name: (order.get(name, len(order)), name == NO_GROUP, name))
    return {name: _rates(groups[name]) for name in names}


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "mean": statistics.fmean(values),
        "p50": percentile(values, 0.5),
        "p90": percentile(values, 0.9),
    }


def summarize(records: list[Record]) -> dict[str, Any]:
    """Every metric of a run, machine-readable (``palaestra eval --json`` prints this)."""
    n = len(records)
    costs = [r["cost_usd"] for r in records if r.get("cost_usd") is not None]
    passed = [r for r in records if r["status"] == EpisodeStatus.PASSED]
    passed_costs = [r["cost_usd"] for r in passed if r.get("cost_usd") is not None]
    error_classes: dict[str, int] = defaultdict(int)
    for r in records:
        if r["status"] == EpisodeStatus.ERROR:
            error_classes[r.get("error_class") or "unknown"] += 1
    tokens = {
        key: sum(r[key] for r in records)
        for key in ("prompt_tokens", "completion_tokens", "cached_tokens")
    }
    return {
        **_rates(records),
        "pass_at_k": pass_at_ks(records),
        "statuses": _count(r["status"] for r in records),
        "end_reasons": _count(r.get("end_reason") for r in records),
        "by_category": group_rates(records, "category"),
        "by_difficulty": group_rates(records, "difficulty"),
        "by_family": group_rates(records, "family"),
        "errors_by_class": {
            name: {"count": count, "rate": count / n}
            for name, count in sorted(error_classes.items(), key=lambda kv: -kv[1])
        },
        "first_errors": [
            {k: r.get(k) for k in ("task_id", "error_class", "error_message", "infra_error")}
            for r in records
            if r["status"] == EpisodeStatus.ERROR
        ][:FIRST_ERRORS],
        "cost": {
            # Unknown costs are counted apart, never as 0: a mean over known costs only.
            "known_trials": len(costs),
            "unknown_trials": n - len(costs),
            "total_usd": sum(costs) if costs else None,
            "per_trial_usd": statistics.fmean(costs) if costs else None,
            # Everything spent (failed trials too) over the tasks solved: what a solve costs.
            "per_solved_usd": sum(costs) / len(passed) if costs and passed else None,
            "solved_with_unknown_cost": len(passed) - len(passed_costs),
        },
        "tokens": {**tokens, "per_trial": {k: v / n for k, v in tokens.items()} if n else {}},
        "mean_steps": statistics.fmean(r["steps"] for r in records) if n else 0.0,
        "timings": {
            phase: _spread([r[phase] for r in records if r.get(phase) is not None])
            for phase in PHASES
        },
    }


def _count(values: Iterable[str | None]) -> dict[str, int]:
    """How often each value occurs, as plain strings in sorted order (None left out)."""
    counts: dict[str, int] = defaultdict(int)
    for v in values:
        if v is not None:
            counts[str(v)] += 1
    return dict(sorted(counts.items()))
