"""What ``bench_learning.py`` makes of its runs: per-kind rates, means over seeds with 95 %
t-intervals, the async-sync difference (Welch), the summary lines and the plot."""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

#: Two-sided 95 % quantiles of Student's t by degrees of freedom (1.96 beyond 30).
_T975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    12: 2.179,
    15: 2.131,
    20: 2.086,
    30: 2.042,
}


def t975(df: float) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (the next smaller
    tabulated df: conservative)."""
    if df >= 31:
        return 1.96
    return _T975[max(d for d in _T975 if d <= max(1, math.floor(df)))]


def interval(values: Sequence[float]) -> dict[str, Any]:
    """Mean, sample standard deviation and 95 % t-interval of ``values`` (one per seed)."""
    n = len(values)
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if n > 1 else None
    half = None if sd is None else t975(n - 1) * sd / math.sqrt(n)
    low = None if half is None else mean - half
    high = None if half is None else mean + half
    return {"n": n, "mean": mean, "sd": sd, "low": low, "high": high, "values": list(values)}


def difference(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """``mean(a) - mean(b)`` with a 95 % Welch interval (None with fewer than 2 of each)."""
    diff = statistics.fmean(a) - statistics.fmean(b)
    if len(a) < 2 or len(b) < 2:
        return {"mean": diff, "low": None, "high": None}
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return {"mean": diff, "low": diff, "high": diff}
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return {"mean": diff, "low": diff - t975(df) * se, "high": diff + t975(df) * se, "df": df}


def kind_of(family: str, instruction: str, tags: Iterable[str] = ()) -> str:
    """A task's kind: its family and its ``kind:<name>`` tag when it has one, else the
    instruction's task line with every quoted value and number elided
    (``shell-warmup: Create the directory `…` (and `…` if needed).``)."""
    for tag in tags:
        if tag.startswith("kind:"):
            return f"{family}: {tag.removeprefix('kind:')}"
    lines = [line for line in instruction.splitlines() if line.strip() and not line.startswith("#")]
    template = re.sub(r"`[^`]*`", "`…`", lines[0] if lines else "")
    return f"{family}: {re.sub(r'[0-9]+', 'N', template)}"


def rates(records: Iterable[dict[str, Any]], kinds: dict[str, str]) -> dict[str, Any]:
    """Pass rate, per kind and per family, and pass@k for every k up to the attempts, from
    ``evaluate``'s final records (``task_id``, ``status``)."""
    per_task: dict[str, list[bool]] = defaultdict(list)
    for r in records:
        per_task[r["task_id"]].append(r["status"] == "passed")
    by_kind: dict[str, list[bool]] = defaultdict(list)
    by_family: dict[str, list[bool]] = defaultdict(list)
    for task_id, results in per_task.items():
        by_kind[kinds[task_id]] += results
        by_family[kinds[task_id].split(":")[0]] += results
    every = [ok for results in per_task.values() for ok in results]
    k_max = min((len(v) for v in per_task.values()), default=0)
    return {
        "pass_rate": statistics.fmean(every) if every else 0.0,
        "episodes": len(every),
        "tasks": len(per_task),
        "per_kind": {k: statistics.fmean(v) for k, v in sorted(by_kind.items())},
        "per_family": {k: statistics.fmean(v) for k, v in sorted(by_family.items())},
        "pass_at_k": {
            k: statistics.fmean(_pass_at_k(v, k) for v in per_task.values())
            for k in range(1, k_max + 1)
        }
        if per_task
        else {},
    }


def _pass_at_k(results: list[bool], k: int) -> float:
    n, c = len(results), sum(results)
    if n - c < k:
        return 1.0
    return 1.0 - math.prod((n - c - i) / (n - i) for i in range(k))


def summarise(runs: list[dict[str, Any]], base: dict[str, Any]) -> dict[str, Any]:
    """Per variant: the final held-out rate over seeds (mean, interval), its gain over the base
    model's greedy rate, whether it beats the base pass@k; and async - sync."""
    finals: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        finals[run["mode"]].append(run["points"][-1]["held_out_pass_rate"])
    base_rate = base["greedy"]["pass_rate"]
    pass_at = base.get("sampled", {}).get("pass_at_k", {})
    top_k = max(pass_at, key=int, default=None)
    out: dict[str, Any] = {"base_greedy": base_rate}
    if top_k is not None:
        out[f"base_pass_at_{top_k}"] = pass_at[top_k]
    for mode, values in finals.items():
        gain = interval([v - base_rate for v in values])
        out[mode] = {"final": interval(values), "gain_over_base": gain}
        if top_k is not None:
            out[mode][f"above_base_pass_at_{top_k}"] = statistics.fmean(values) > pass_at[top_k]
    if "async" in finals and "sync" in finals:
        out["async_minus_sync"] = difference(finals["async"], finals["sync"])
    return out


def _fmt(iv: dict[str, Any]) -> str:
    if iv.get("low") is None:
        return f"{100 * iv['mean']:+.1f}"
    return f"{100 * iv['mean']:+.1f} [{100 * iv['low']:+.1f}, {100 * iv['high']:+.1f}]"


def summary_lines(summary: dict[str, Any]) -> list[str]:
    lines = [f"base model, greedy: {100 * summary['base_greedy']:.1f} %"]
    lines += [
        f"base model, {k.replace('base_', '')} sampled: {100 * v:.1f} %"
        for k, v in summary.items()
        if k.startswith("base_pass_at_")
    ]
    for mode in ("async", "sync"):
        if mode in summary:
            s = summary[mode]
            lines.append(
                f"{mode}: final {100 * s['final']['mean']:.1f} % over {s['final']['n']} seeds, "
                f"gain over base {_fmt(s['gain_over_base'])} points (95 % t-interval)"
            )
    if "async_minus_sync" in summary:
        lines.append(f"async - sync: {_fmt(summary['async_minus_sync'])} points (Welch)")
    return lines


def plot(runs: list[dict[str, Any]], base: dict[str, Any], path: Path, title: str) -> str:
    """Held-out pass rate against training minutes: each seed thin, the mean over seeds thick
    with its min-max band, the base model's greedy rate and pass@k as lines."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no PNG (pip install 'palaestra[plot]'); see the JSON"
    fig, ax = plt.subplots(figsize=(8, 4.5))
    by_mode: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        by_mode[run["mode"]].append(run)
    for colour, (mode, group) in zip(
        ("tab:blue", "tab:orange"), sorted(by_mode.items()), strict=False
    ):
        for run in group:
            ax.plot(
                [p["wall_s"] / 60 for p in run["points"]],
                [p["held_out_pass_rate"] for p in run["points"]],
                color=colour,
                alpha=0.3,
                lw=1,
            )
        length = min(len(run["points"]) for run in group)
        minutes = [
            statistics.fmean(r["points"][i]["wall_s"] / 60 for r in group) for i in range(length)
        ]
        values = [[r["points"][i]["held_out_pass_rate"] for r in group] for i in range(length)]
        ax.plot(
            minutes,
            [statistics.fmean(v) for v in values],
            color=colour,
            lw=2.5,
            marker="o",
            label=f"{mode} (mean of {len(group)} seeds)",
        )
        ax.fill_between(
            minutes, [min(v) for v in values], [max(v) for v in values], color=colour, alpha=0.15
        )
    ax.axhline(base["greedy"]["pass_rate"], color="grey", ls=":", label="base model, greedy")
    pass_at = base.get("sampled", {}).get("pass_at_k", {})
    if pass_at:
        k = max(pass_at, key=int)
        ax.axhline(pass_at[k], color="black", ls="--", label=f"base model, pass@{k} sampled")
    ax.set(xlabel="training wall time (min)", ylabel="held-out pass rate (greedy)", title=title)
    ax.set_ylim(0, 1)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return f"wrote {path}"
