"""``palaestra report``: one self-contained HTML file for one run or a comparison of several.

The page needs no network: its CSS and JavaScript are inlined from ``report_assets/`` and the
data is embedded as gzipped, base64-encoded JSON (``<script id="report-data">``). The overview
and the success charts are drawn here (:mod:`palaestra.run.report_figures`: static HTML and SVG,
readable without JavaScript); the cost scatter, histograms, comparison and trajectory viewer are
drawn by the page's script. Every bar and point carries its number in ``data-value`` and a
``<title>``, and each chart has a table with the same numbers, so the page can be read (and
tested) without looking at pixels.

Pass rates and other aggregates come from :func:`palaestra.run.metrics.summarize`, the same
numbers ``palaestra eval`` prints. Trajectories are embedded whole except for long texts
(command outputs, messages), which are cut to ``max_text`` characters with a note; the full
text stays in ``results.db``.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

from palaestra.run import metrics
from palaestra.run.report_figures import figures
from palaestra.run.store import read_episodes, read_run, read_steps

ASSETS = Path(__file__).resolve().parent / "report_assets"
MAX_TEXT = 4000
#: Trajectories embedded per run by default: a page of 10,000 full ones would weigh hundreds of
#: megabytes, more than a browser opens comfortably.
MAX_TRAJECTORIES = 2000

#: The episode columns the page needs (the rest of a row stays in the store).
_EPISODE_KEYS = (
    "id",
    "task_id",
    "family",
    "category",
    "difficulty",
    "attempt",
    "status",
    "end_reason",
    "error_class",
    "error_message",
    "reward",
    "rewards",
    "steps",
    "cost_usd",
    "wall_s",
    "sandbox_start_s",
    "agent_s",
    "policy_s",
    "verifier_s",
    "prompt_tokens",
    "completion_tokens",
    "episode_id",
    "verifier_output",
)


def _cut(text: Any, limit: int) -> Any:
    if isinstance(text, str) and len(text) > limit:
        return text[:limit] + f"\n[… {len(text) - limit} more characters in results.db]"
    return text


def _cut_message(message: dict[str, Any], limit: int) -> dict[str, Any]:
    return {k: _cut(v, limit) for k, v in message.items()}


def _turn(step: dict[str, Any], next_step: dict[str, Any] | None, limit: int) -> dict[str, Any]:
    execution = step["execution"]
    if execution is not None:
        execution = {k: _cut(v, limit) for k, v in execution.items()}
        output = step["execution"].get("output")
        # The scaffold sends the output back in the next request, which the viewer shows: keep
        # one copy (the page would otherwise carry most outputs twice).
        if (
            output
            and next_step is not None
            and any(
                output in (m.get("content") or "")
                for m in next_step["new_messages"]
                if isinstance(m.get("content"), str)
            )
        ):
            execution["output"] = None
            execution["output_in_next_request"] = True
    response = step["response"]
    return {
        "turn": step["turn"],
        "messages_from": step["messages_from"],
        "new_messages": [_cut_message(m, limit) for m in step["new_messages"]],
        "response": {
            "content": _cut(response.get("content"), limit),
            "tool_calls": response.get("tool_calls", []),
            "finish_reason": response.get("finish_reason"),
            "cost_usd": response.get("cost_usd"),
        },
        "execution": execution,
    }


def _reward_signals(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Pass rates grouped by how many reward keys the verifier reported."""
    for r in records:
        r["_signals"] = f"{len(r['rewards'])} key{'s' if len(r['rewards']) != 1 else ''}"
    grouped = metrics.group_rates(records, "_signals")
    for r in records:
        del r["_signals"]
    return grouped


def run_data(
    run_dir: Path | str, max_text: int = MAX_TEXT, max_trajectories: int = MAX_TRAJECTORIES
) -> dict[str, Any]:
    """Everything the page shows about one run (blocking: reads the store).

    The trajectories of the first ``max_trajectories`` episodes (in the order they finished;
    negative: all) are embedded; the others have ``turns`` None and the viewer says so.
    """
    run = read_run(run_dir)
    records = read_episodes(run_dir)
    embedded = records if max_trajectories < 0 else records[:max_trajectories]
    steps = read_steps(run_dir, [r["id"] for r in embedded])
    episodes = []
    for i, r in enumerate(records):
        e = {k: r[k] for k in _EPISODE_KEYS}
        e["verifier_output"] = _cut(e["verifier_output"], max_text)
        turns = steps.get(r["id"], [])  # none when the episode ended before its first turn
        nexts = [*turns[1:], None] if turns else []
        e["turns"] = (
            [_turn(s, nxt, max_text) for s, nxt in zip(turns, nexts, strict=True)]
            if i < len(embedded)
            else None
        )
        episodes.append(e)
    summary = metrics.summarize(records)
    summary["by_reward_signals"] = _reward_signals(records)
    return {
        "dir": str(run_dir),
        "run_id": run["run_id"],
        "env_id": run["env_id"],
        "policy": run["policy"],
        "scaffold": run["scaffold"],
        "sandbox": run["sandbox"],
        "started_at": run["started_at"],
        "finished_at": run["finished_at"],
        "stop_reason": run["stop_reason"],
        "planned": _planned(run["config"]),
        "summary": summary,
        "episodes": episodes,
    }


def _labels(runs: list[dict[str, Any]]) -> list[str]:
    """``policy / scaffold``, with the directory name added where two runs would share one."""
    base = [f"{r['policy']} / {r['scaffold']}" for r in runs]
    counts = Counter(base)
    return [
        b if counts[b] == 1 else f"{b} ({Path(r['dir']).name})"
        for b, r in zip(base, runs, strict=True)
    ]


def render(runs: list[dict[str, Any]]) -> str:
    """The HTML page for ``runs`` (from :func:`run_data`)."""
    for run, label in zip(runs, _labels(runs), strict=True):
        run["label"] = label
    # gzip + base64: a large run's trajectories shrink several times; the page inflates them
    # with the browser's DecompressionStream (no library, no network).
    raw = json.dumps({"runs": runs}, separators=(",", ":")).encode()
    data = base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode()
    page = (ASSETS / "report.html").read_text(encoding="utf-8")
    title = " vs ".join(r["label"] for r in runs)
    for placeholder, html in figures(runs).items():  # before the data: it holds no placeholder
        page = page.replace(placeholder, html)
    return (
        page.replace("/*CSS*/", (ASSETS / "report.css").read_text(encoding="utf-8"))
        .replace("/*JS*/", (ASSETS / "report.js").read_text(encoding="utf-8"))
        .replace("{{TITLE}}", _html_escape(f"palaestra report: {title}"))
        .replace("{{DATA}}", data)
    )


def _html_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_report(
    run_dirs: list[Path],
    output: Path | str,
    max_text: int = MAX_TEXT,
    max_trajectories: int = MAX_TRAJECTORIES,
) -> Path:
    """Write the report of ``run_dirs`` to ``output`` (blocking; call via a thread in async)."""
    if not run_dirs:
        raise ValueError("give at least one run directory")
    runs = [run_data(d, max_text, max_trajectories) for d in run_dirs]
    output = Path(output)
    output.write_text(render(runs), encoding="utf-8")
    return output


def _planned(config: dict[str, Any]) -> int | None:
    """Episodes the run set out to play: a stream records its own count (None when it was
    open-ended); an eval plans every attempt of every task."""
    if "planned" in config:
        return config["planned"]
    identity = config["identity"]
    return identity["attempts"] * len(identity["tasks"])
