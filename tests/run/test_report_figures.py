"""The report's main figures read without JavaScript, with 30 families: the page's HTML is
parsed as written (no script runs), the numbers compared with the rows the store was given."""

from __future__ import annotations

from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path

from palaestra.run.report import write_report
from palaestra.run.store import EpisodeRow, ResultStore

FAMILIES = [f"family-{i:02d}" for i in range(30)]
TIERS = ("easy", "medium", "hard")
IDENTITY = {
    "env_id": "gen",
    "policy": "p",
    "scaffold": "bash",
    "sandbox": "local",
    "attempts": 2,
    "seed": 0,
    "tasks": [f"{f}-{t}" for f in FAMILIES for t in TIERS],
    "env_overrides": {},
}


class Page(HTMLParser):
    """Every element outside <script>, with its attributes, its text and its enclosing chart."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[dict] = []
        self.open: list[dict] = []

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs, void=True)

    def handle_starttag(self, tag, attrs, void=False):
        parent_chart = next((e["chart"] for e in reversed(self.open) if e["chart"]), None)
        attrs = dict(attrs)
        element = {
            "tag": tag,
            "attrs": attrs,
            "text": "",
            "chart": attrs.get("data-chart") or attrs.get("data-chart-box") or parent_chart,
        }
        self.elements.append(element)
        if not void and tag not in ("meta", "br", "input"):
            self.open.append(element)

    def handle_endtag(self, tag):
        while any(e["tag"] == tag for e in self.open):
            if self.open.pop()["tag"] == tag:
                break

    def handle_data(self, data):
        if self.open and self.open[-1]["tag"] != "script":
            for element in self.open:
                element["text"] += data

    def find(self, tag: str, **attrs: str) -> list[dict]:
        return [
            e
            for e in self.elements
            if e["tag"] == tag
            and all(e["attrs"].get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]


async def _store_of_30_families(run_dir: Path) -> dict[str, float]:
    """Family ``i`` passes ``i % 7`` of its 6 episodes (3 tiers x 2 attempts), at most 6."""
    rates = {}
    store = await ResultStore.open(run_dir)
    try:
        await store.begin_run("r", identity=IDENTITY, config={})
        for i, family in enumerate(FAMILIES):
            passes = min(i % 7, 6)
            rates[family] = passes / 6
            for j in range(6):
                status = "passed" if j < passes else "failed"
                await store.add_episode(
                    EpisodeRow(
                        {
                            "run_id": "r",
                            "task_id": f"{family}-{TIERS[j % 3]}",
                            "attempt": j // 3,
                            "try": 0,
                            "final": 1,
                            "status": status,
                            "end_reason": "submitted",
                            "reward": float(status == "passed"),
                            "rewards": "{}",
                            "verified": 1,
                            "steps": 2,
                            "prompt_tokens": 0,
                            "completion_tokens": 0,
                            "cached_tokens": 0,
                            "infra_error": 0,
                            "wall_s": 0.5,
                            "finished_at": 1.0,
                            "family": family,
                            "category": "algorithms",
                            "difficulty": TIERS[j % 3],
                        }
                    )
                )
    finally:
        await store.aclose()
    return rates


async def test_thirty_families_are_a_sorted_labelled_chart_without_javascript(tmp_path):
    rates = await _store_of_30_families(tmp_path / "run")
    report = write_report([tmp_path / "run"], tmp_path / "report.html")
    page = Page()
    page.feed(report.read_text())

    bars = [e for e in page.find("rect") if e["chart"] == "by_family"]
    shown = {b["attrs"]["data-group"]: float(b["attrs"]["data-value"]) for b in bars}
    assert shown == rates, "one bar a family, holding its pass rate"
    order = [b["attrs"]["data-group"] for b in bars]
    assert order == sorted(rates, key=lambda f: (-rates[f], f)), "sorted, best first"
    ys = [float(b["attrs"]["y"]) for b in bars]
    heights = {float(b["attrs"]["height"]) for b in bars}
    assert all(b - a >= max(heights) for a, b in zip(ys, ys[1:], strict=False)), "no overlap"
    (svg,) = page.find("svg", data_chart="by_family")
    assert float(svg["attrs"]["height"]) >= ys[-1] + max(heights), "the chart grows with rows"
    (chart,) = page.find("div", data_chart_box="by_family")  # the names' column and the bars
    # every family's name and number is readable as text, not only in tooltips
    assert all(f in chart["text"] for f in FAMILIES)
    assert "66.7% (4/6)" in chart["text"] and "0.0% (0/6)" in chart["text"]

    for name in ("by_difficulty", "by_category", "by_family", "by_reward_signals", "pass_at_k"):
        titles = [
            e["text"]
            for e in page.elements
            if e["chart"] == name and "axis-title" in e["attrs"].get("class", "")
        ]
        assert len(titles) == 2 and all(titles), f"{name}: both axes labelled"
        (table,) = page.find("table", data_table=name)
        assert table["text"], f"{name}: its numbers as a table"
    difficulty = {
        b["attrs"]["data-group"]: float(b["attrs"]["data-value"])
        for b in page.find("rect")
        if b["chart"] == "by_difficulty"
    }
    by_tier: dict[str, list[int]] = defaultdict(list)
    for family in FAMILIES:
        passes = round(rates[family] * 6)
        for j in range(6):
            by_tier[TIERS[j % 3]].append(j < passes)
    assert difficulty == {t: sum(v) / len(v) for t, v in by_tier.items()}
    assert list(difficulty) == list(TIERS)

    sections = page.find("section")
    explained = [
        s
        for s in sections
        if any(
            e["tag"] == "p" and "explain" in e["attrs"].get("class", "") and e["text"] in s["text"]
            for e in page.elements
        )
    ]
    assert len(explained) == len(sections) >= 10, "every figure says what it shows"
    (overview,) = page.find("table", data_table="overview")
    assert (
        "180" in overview["text"] and f"{100 * sum(rates.values()) / 30:.1f}%" in overview["text"]
    )
