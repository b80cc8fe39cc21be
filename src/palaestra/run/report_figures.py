"""The report's main figures, drawn here as static HTML and SVG: readable without JavaScript.

The overview table and the rate figures (success by difficulty, category, family and
reward-signal count; pass@k) are horizontal bar charts, one row per group and one bar per run,
so they grow downwards with the number of groups (30 families stay readable) instead of
squeezing. Rows are sorted by the first run's rate, best first (difficulty tiers and k keep
their own order). Each bar carries its number in ``data-value`` and a ``<title>``, each chart
labels its axes, and each figure has a table with the same numbers.
"""

from __future__ import annotations

from html import escape
from typing import Any

COLORS = ("var(--c0)", "var(--c1)", "var(--c2)", "var(--c3)", "var(--c4)", "var(--c5)")
_LABEL_W = 200  # px: the group names' column
_PLOT = 0.86  # the share of the bars' SVG that 100 % takes; the rest holds the numbers
_MIN_BAR = 3  # px: how wide a 0 % bar's mark is
_BAR_H, _ROW_GAP, _AXIS_H = 13, 9, 34


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _usd(x: float | None) -> str:
    return "unknown" if x is None else f"${x:.4f}"


def _num(x: float | None, digits: int) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _table(name: str, head: list[str], rows: list[list[str]]) -> str:
    cells = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return (
        f'<table data-table="{escape(name)}"><thead><tr>{cells}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


def legend(runs: list[dict[str, Any]]) -> str:
    if len(runs) < 2:
        return ""
    items = "".join(
        f'<span><i style="background:{COLORS[i % len(COLORS)]}"></i>{escape(r["label"])}</span>'
        for i, r in enumerate(runs)
    )
    return f'<div class="legend">{items}</div>'


def bar_chart(
    name: str,
    runs: list[dict[str, Any]],
    groups: dict[str, list[dict[str, Any] | None]],
    *,
    group_axis: str,
    value_axis: str,
) -> str:
    """Horizontal bars of rates in [0, 1]: ``groups`` maps a group to one entry a run
    (``{"value", "text"}`` or None), in the order given.

    Two SVGs side by side: the group names in a fixed column, and the bars in one that takes
    the rest of the page's width (its x coordinates are percentages, its text keeps its size).
    A 0 % bar is a short mark, so it shows that the run has a value there."""
    if not groups:
        return '<p class="muted">No data.</p>'
    row_h = len(runs) * _BAR_H + _ROW_GAP
    height = _AXIS_H + len(groups) * row_h + _AXIS_H
    bottom = height - _AXIS_H
    labels = [
        f'<svg class="labels" width="{_LABEL_W}" height="{height}" aria-hidden="true">'
        f'<text class="axis-title" x="{_LABEL_W - 8}" y="{height - 8}" '
        f'text-anchor="end">{escape(group_axis)} ↑</text>'
    ]
    parts = [
        f'<svg class="chart rates" data-chart="{escape(name)}" width="100%" '
        f'height="{height}" role="img" aria-label="{escape(value_axis)} by '
        f'{escape(group_axis)}">'
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        x = _pct_x(tick)
        anchor = "start" if tick == 0 else "middle"
        parts.append(
            f'<line class="axis" x1="{x}" x2="{x}" y1="{_AXIS_H - 6}" '
            f'y2="{bottom}"/><text x="{x}" y="{_AXIS_H - 10}" '
            f'text-anchor="{anchor}">{round(100 * tick)}%</text>'
        )
    parts.append(
        f'<text class="axis-title" x="{_pct_x(0.5)}" y="{height - 8}" '
        f'text-anchor="middle">{escape(value_axis)} →</text>'
    )
    for gi, (group, entries) in enumerate(groups.items()):
        y0 = _AXIS_H + gi * row_h + _ROW_GAP / 2
        shown = group if len(group) <= 30 else group[:29] + "…"
        labels.append(
            f'<text x="{_LABEL_W - 8}" y="{y0 + len(runs) * _BAR_H / 2 + 4:.1f}" '
            f'text-anchor="end"><title>{escape(group)}</title>{escape(shown)}</text>'
        )
        for ri, entry in enumerate(entries):
            if entry is None:
                continue
            y = y0 + ri * _BAR_H
            # a 0 % bar is a mark of _MIN_BAR px (a percentage of 0 would draw nothing)
            width = _pct_x(entry["value"]) if entry["value"] > 0 else f"{_MIN_BAR}"
            tip = f"{group} · {runs[ri]['label']}: {entry['text']}"
            parts.append(
                f'<rect class="bar" x="0" y="{y:.1f}" width="{width}" '
                f'height="{_BAR_H - 2}" fill="{COLORS[ri % len(COLORS)]}" '
                f'data-group="{escape(group)}" data-run="{ri}" data-value="{entry["value"]}">'
                f"<title>{escape(tip)}</title></rect>"
                f'<text class="value" x="{_pct_x(entry["value"])}" dx="{_MIN_BAR + 3}" '
                f'y="{y + _BAR_H - 3:.1f}">{escape(entry["text"])}</text>'
            )
    parts.append("</svg>")
    labels.append("</svg>")
    rows = [[g, *(e["text"] if e else "—" for e in entries)] for g, entries in groups.items()]
    head = [group_axis, *(r["label"] for r in runs)]
    return (
        legend(runs)
        + f'<div class="rates" data-chart-box="{escape(name)}">'
        + "".join(labels)
        + "".join(parts)
        + "</div><details><summary>table</summary>"
        + _table(name, head, rows)
        + "</details>"
    )


def _pct_x(value: float) -> str:
    """The x of ``value`` (in [0, 1]) in a bar chart, as a percentage of its width."""
    return f"{100 * _PLOT * value:.2f}%"


def rate_chart(runs: list[dict[str, Any]], key: str, group_axis: str, *, sort: bool) -> str:
    """Pass rate per group of ``summary[key]`` (a ``metrics.group_rates`` result)."""
    groups: dict[str, list[dict[str, Any] | None]] = {}
    for ri, run in enumerate(runs):
        for group, r in run["summary"][key].items():
            entry = {
                "value": r["pass_rate"],
                "text": f"{_pct(r['pass_rate'])} ({r['passed']}/{r['episodes']})",
            }
            groups.setdefault(group, [None] * len(runs))[ri] = entry
    if sort:
        first = {g: e[0]["value"] if e[0] else -1.0 for g, e in groups.items()}
        groups = dict(sorted(groups.items(), key=lambda kv: (-first[kv[0]], kv[0])))
    return bar_chart(
        key,
        runs,
        groups,
        group_axis=group_axis,
        value_axis="pass rate (episodes passed / episodes)",
    )


def pass_at_k_chart(runs: list[dict[str, Any]]) -> str:
    groups: dict[str, list[dict[str, Any] | None]] = {}
    for ri, run in enumerate(runs):
        for k, value in run["summary"]["pass_at_k"].items():
            entry = {"value": value, "text": _pct(value)}
            groups.setdefault(f"k={k}", [None] * len(runs))[ri] = entry
    return bar_chart(
        "pass_at_k",
        runs,
        groups,
        group_axis="attempts k",
        value_axis="pass@k (chance that one of k attempts passes)",
    )


def overview(runs: list[dict[str, Any]]) -> str:
    head = [
        "run",
        "env",
        "episodes",
        "pass rate",
        "mean reward",
        "error rate",
        "cost",
        "per trial",
        "per solved",
        "unknown cost",
        "mean steps",
        "tokens/trial",
        "stopped",
    ]
    rows, notes = [], []
    for run in runs:
        s = run["summary"]
        per_trial = s["tokens"].get("per_trial") or {}
        tokens = (
            (per_trial["prompt_tokens"] + per_trial["completion_tokens"]) if per_trial else None
        )
        episodes = (
            str(s["episodes"]) if run["planned"] is None else f"{s['episodes']}/{run['planned']}"
        )
        rows.append(
            [
                run["label"],
                run["env_id"],
                episodes,
                _pct(s["pass_rate"]),
                _num(s["mean_reward"], 3),
                _pct(s["error_rate"]),
                _usd(s["cost"]["total_usd"]),
                _usd(s["cost"]["per_trial_usd"]),
                _usd(s["cost"]["per_solved_usd"]),
                str(s["cost"]["unknown_trials"]),
                _num(s["mean_steps"], 1),
                _num(tokens, 0),
                run["stop_reason"] or "",
            ]
        )
        errors = ", ".join(
            f"{k} {v['count']} ({_pct(v['rate'])})" for k, v in s["errors_by_class"].items()
        )
        if errors:
            notes.append(f"<p>{escape(run['label'])} errors: {escape(errors)}</p>")
    return _table("overview", head, rows) + "".join(notes)


def figures(runs: list[dict[str, Any]]) -> dict[str, str]:
    """The HTML of each server-side figure, by its placeholder in ``report.html``."""
    return {
        "{{OVERVIEW}}": overview(runs),
        "{{CHART_DIFFICULTY}}": rate_chart(runs, "by_difficulty", "difficulty", sort=False),
        "{{CHART_CATEGORY}}": rate_chart(runs, "by_category", "category", sort=True),
        "{{CHART_FAMILY}}": rate_chart(runs, "by_family", "family", sort=True),
        "{{CHART_SIGNALS}}": rate_chart(runs, "by_reward_signals", "reward keys", sort=True),
        "{{CHART_PASSK}}": pass_at_k_chart(runs),
    }
