"""`palaestra report` in headless Chromium (Debian's chromium), driven over the DevTools protocol.

Two real runs on the local sandbox (two scripted policies with prices) are compared; the test
checks that the page renders with no JS error and no network request, that the charts hold the
numbers the store holds (computed here with SQL, independently of palaestra.run.metrics), and
that the trajectory viewer opens an episode and shows its turns and command outputs.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from palaestra.llm import LLMResponse, ScriptedPolicy
from palaestra.run import evaluate
from tests.conftest import SUBMIT_ACTION, bash_action

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1800",
]


def chromium_binary() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    message = "headless Chromium is needed for the report test: apt-get install chromium"
    if os.environ.get("CI") == "true":
        pytest.fail(message)  # on CI a skipped browser test would hide a broken report
    pytest.skip(message)


class DevTools:
    """A minimal Chrome DevTools protocol client over one page's websocket."""

    def __init__(self, ws: Any) -> None:
        self.ws, self.ids, self.events = ws, itertools.count(1), []
        self.pending: dict[int, asyncio.Future] = {}
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for raw in self.ws:
            msg = json.loads(raw)
            if "id" in msg and msg["id"] in self.pending:
                self.pending.pop(msg["id"]).set_result(msg)
            else:
                self.events.append(msg)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        i = next(self.ids)
        self.pending[i] = asyncio.get_running_loop().create_future()
        await self.ws.send(json.dumps({"id": i, "method": method, "params": params}))
        msg = await asyncio.wait_for(self.pending[i], 30)
        assert "error" not in msg, msg
        return msg["result"]

    async def js(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def errors(self) -> list[dict[str, Any]]:
        return [
            e
            for e in self.events
            if e.get("method") == "Runtime.exceptionThrown"
            or (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] == "error")
            or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")
        ]


async def _page(tmp_path: Path):
    """Start Chromium (its own process group), return (process, DevTools on a blank page)."""
    from websockets.asyncio.client import connect

    profile = tmp_path / "chromium-profile"
    # Its TMPDIR, for the singleton socket it makes there (a socket's path must stay short, so
    # not under tmp_path), removed by _close: a killed Chromium leaves it behind.
    scratch = tempfile.mkdtemp(prefix="palaestra-chromium-")
    proc = await asyncio.create_subprocess_exec(
        chromium_binary(),
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        "--remote-debugging-port=0",
        "about:blank",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "TMPDIR": scratch},
    )
    proc.scratch = scratch  # type: ignore[attr-defined]
    port_file = profile / "DevToolsActivePort"
    for _ in range(300):
        if port_file.exists() and port_file.read_text().strip():
            break
        await asyncio.sleep(0.1)
    port = int(port_file.read_text().split()[0])

    def targets() -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            return json.load(r)

    page = next(t for t in await asyncio.to_thread(targets) if t["type"] == "page")
    ws = await connect(page["webSocketDebuggerUrl"], max_size=None)
    return proc, DevTools(ws)


async def _close(browser: asyncio.subprocess.Process, page: DevTools) -> None:
    """End the page's connection and Chromium's whole process group, and remove its TMPDIR."""
    page.reader.cancel()
    await page.ws.close()
    os.killpg(browser.pid, signal.SIGKILL)
    await browser.wait()
    shutil.rmtree(browser.scratch, ignore_errors=True)  # type: ignore[attr-defined]


async def _open(page: DevTools, report: Path) -> None:
    """Load ``report`` in the page and wait until it has drawn itself, with no JS error."""
    await page.call("Runtime.enable")
    await page.call("Log.enable")
    await page.call("Network.enable")
    await page.call("Page.enable")
    await page.call("Page.navigate", url=report.as_uri())
    for _ in range(300):
        if await page.js("document.body && document.body.dataset.rendered === 'true'"):
            break
        await asyncio.sleep(0.1)
    assert await page.js("document.body.dataset.rendered") == "true"
    assert page.errors() == []


def _task(make_task, root: Path, name: str, difficulty: str, category: str, family: str | None):
    path = make_task(name, difficulty=difficulty, category=category, root=root)
    if family is not None:
        toml = path / "task.toml"
        toml.write_text(
            toml.read_text().replace('tags = ["test"]', f'tags = ["test"]\nfamily = "{family}"')
        )


def _policy(solves: set[str], price: float) -> ScriptedPolicy:
    def answer(request):
        if request.metadata["turn"] > 0:
            return LLMResponse(content=SUBMIT_ACTION, cost_usd=price)
        value = 42 if request.metadata["task_id"] in solves else 7
        return LLMResponse(
            content=bash_action(f"echo {value} > /app/answer.txt && echo wrote-{value}"),
            cost_usd=price,
        )

    return ScriptedPolicy(answer)


@pytest.fixture
async def two_runs(tmp_path, make_task):
    root = tmp_path / "tasks"
    _task(make_task, root, "grid-easy", "easy", "puzzles", "grid")
    _task(make_task, root, "grid-hard", "hard", "puzzles", "grid")
    _task(make_task, root, "text-medium", "medium", "text", "strings")
    _task(make_task, root, "plain-easy", "easy", "text", None)
    strong = tmp_path / "strong"
    weak = tmp_path / "weak"
    everything = {"grid-easy", "grid-hard", "text-medium", "plain-easy"}
    await evaluate(str(root), _policy(everything, 0.02), attempts=2, concurrency=4, out_dir=strong)
    await evaluate(
        str(root),
        _policy({"grid-easy", "plain-easy"}, 0.005),
        attempts=2,
        concurrency=4,
        out_dir=weak,
    )
    return strong, weak


def _report_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "palaestra.cli", "report", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _store_rates(run_dir: Path, column: str) -> dict[str, float]:
    with sqlite3.connect(run_dir / "results.db") as conn:
        rows = conn.execute(
            f"SELECT COALESCE({column}, '—'), AVG(status = 'passed') FROM episodes "
            f"WHERE final = 1 GROUP BY 1"
        ).fetchall()
    return dict(rows)


@pytest.mark.slow
async def test_report_renders_holds_the_numbers_and_opens_episodes(tmp_path, two_runs):
    strong, weak = two_runs
    report = tmp_path / "report.html"
    proc = await asyncio.to_thread(_report_cli, str(strong), str(weak), "-o", str(report))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html = report.read_text()
    assert (
        "<script src" not in html
        and "<link" not in html
        and "http://" not in html.split('<script id="report-data"')[0]
    )

    browser, page = await _page(tmp_path)
    try:
        await _open(page, report)
        requested = [
            e["params"]["request"]["url"]
            for e in page.events
            if e.get("method") == "Network.requestWillBeSent"
        ]
        assert all(url.startswith("file://") for url in requested), requested

        bars = await page.js(
            "[...document.querySelectorAll('svg[data-chart] rect.bar')].map(r => "
            "({chart: r.closest('svg').dataset.chart, group: r.dataset.group, "
            "run: Number(r.dataset.run), value: Number(r.dataset.value)}))"
        )

        def chart(name: str, run: int) -> dict[str, float]:
            return {b["group"]: b["value"] for b in bars if b["chart"] == name and b["run"] == run}

        for run_index, run_dir in enumerate((strong, weak)):
            for name, column in (
                ("by_difficulty", "difficulty"),
                ("by_category", "category"),
                ("by_family", "family"),
            ):
                assert chart(name, run_index) == pytest.approx(_store_rates(run_dir, column))
        assert chart("by_difficulty", 1) == {"easy": 1.0, "medium": 0.0, "hard": 0.0}
        assert list(chart("by_difficulty", 0)) == ["easy", "medium", "hard"]
        assert chart("pass_at_k", 1) == pytest.approx({"k=1": 0.5, "k=2": 0.5})

        points = await page.js(
            "[...document.querySelectorAll('svg[data-chart=cost_vs_success] circle')].map(c => "
            "({run: Number(c.dataset.run), task: c.dataset.task, rate: Number(c.dataset.value), "
            "cost: Number(c.dataset.cost)}))"
        )
        assert len(points) == 8  # 4 tasks x 2 runs
        with sqlite3.connect(weak / "results.db") as conn:
            weak_costs = dict(
                conn.execute(
                    "SELECT task_id, AVG(cost_usd) FROM episodes WHERE final = 1 GROUP BY task_id"
                )
            )
        assert {p["task"]: p["cost"] for p in points if p["run"] == 1} == pytest.approx(weak_costs)
        assert (
            await page.js("document.querySelectorAll('[data-table=comparison] tbody tr').length")
            == 4
        )
        steps_hist = await page.js(
            "[...document.querySelectorAll('svg[data-chart=steps] rect')].map(r => Number(r.dataset.value))"
        )
        assert sum(steps_hist) == 16  # every episode of both runs is counted once

        # the viewer: open the weak run's failed episode of text-medium and read its turns
        opened = await page.js(
            "(() => { document.getElementById('filter-run').value = '1';"
            " document.getElementById('filter-run').dispatchEvent(new Event('change'));"
            " const row = [...document.querySelectorAll('#episodes tr.episode')]"
            "   .find(r => r.cells[0].textContent === 'text-medium');"
            " row.click(); return row.dataset.episode; })()"
        )
        episode_rowid = int(opened.split(":")[1])
        with sqlite3.connect(weak / "results.db") as conn:
            status, n_steps = conn.execute(
                "SELECT status, steps FROM episodes WHERE id = ?", (episode_rowid,)
            ).fetchone()
            outputs = [
                json.loads(e)["output"]
                for (e,) in conn.execute(
                    "SELECT execution FROM steps WHERE episode = ? ORDER BY turn", (episode_rowid,)
                )
            ]
        assert (
            await page.js("document.getElementById('viewer-status').textContent")
            == status
            == "failed"
        )
        turns = await page.js(
            "[...document.querySelectorAll('#viewer .turn')].map(t => t.textContent)"
        )
        assert len(turns) == n_steps == 2
        # the first command's output comes back in the second request; the submission's own
        # output (no request follows) is shown under its command
        assert outputs[0] == "wrote-7\n" and "echo 7 > /app/answer.txt" in turns[0]
        assert "<output>\nwrote-7\n</output>" in turns[1]
        last_output = await page.js(
            "document.querySelector('#viewer .turn[data-turn=\"1\"] pre.output').textContent"
        )
        assert last_output == outputs[1] and outputs[1].startswith(
            "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
        )
        assert page.errors() == []
        await _assert_layout(page)

        shot = await page.call("Page.captureScreenshot", format="png")
        (tmp_path / "report.png").write_bytes(base64.b64decode(shot["data"]))
        assert (tmp_path / "report.png").read_bytes()[:4] == b"\x89PNG"
    finally:
        await _close(browser, page)


async def _assert_layout(page: DevTools) -> None:
    """What a reader sees, measured on the rendered page: a healthy episode's viewer holds no
    stray "null"; the episode list keeps each id on one line and its run column in view; the
    charts span the page; a 0 % bar is a visible mark."""
    viewer = await page.js(
        "(() => { document.getElementById('filter-run').value = '0';"
        " document.getElementById('filter-run').dispatchEvent(new Event('change'));"
        " document.querySelector('#episodes tr.episode').click();"
        " const v = document.getElementById('viewer');"
        " return {status: document.getElementById('viewer-status').textContent,"
        "   text: v.textContent, nulls: [...v.childNodes].filter(n => n.nodeType === 3).length};"
        " })()"
    )
    assert viewer["status"] == "passed"
    assert "null" not in viewer["text"] and viewer["nulls"] == 0, viewer["text"][:300]

    # a laptop's width: the list must stay whole there too (it held a third of the page)
    await page.call(
        "Emulation.setDeviceMetricsOverride",
        width=1100,
        height=900,
        deviceScaleFactor=1,
        mobile=False,
    )
    rows = await page.js(
        "(() => { document.getElementById('filter-run').value = '';"
        " document.getElementById('filter-run').dispatchEvent(new Event('change'));"
        " const box = document.getElementById('episodes').getBoundingClientRect();"
        " return [...document.querySelectorAll('#episodes tr.episode')].map(r => {"
        "   const range = document.createRange(); range.selectNodeContents(r.cells[0]);"
        "   const run = r.cells[r.cells.length - 1];"
        "   return {id: r.cells[0].textContent, lines: range.getClientRects().length,"
        "     runRight: run.getBoundingClientRect().right, boxRight: box.right,"
        "     runCut: run.scrollWidth > run.clientWidth}; }); })()"
    )
    assert len(rows) == 16
    for row in rows:
        assert row["lines"] == 1, f"{row['id']} wraps over {row['lines']} lines"
        assert row["runRight"] <= row["boxRight"] and not row["runCut"], row
    await page.call("Emulation.clearDeviceMetricsOverride")

    widths = await page.js(
        "(() => { const main = document.querySelector('main'); const cs = getComputedStyle(main);"
        " const page = main.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);"
        " const w = (e) => e.getBoundingClientRect().width;"
        " return {page, rates: [...document.querySelectorAll('svg[data-chart]')]"
        "  .filter(c => c.querySelector('rect.bar') && !c.closest('.charts')).map(c =>"
        "   ({chart: c.dataset.chart, width: w(c), full: Math.max(...[...c.querySelectorAll("
        "     'rect.bar')].map(w))})),"
        "  scripted: [...document.querySelectorAll('.charts svg.chart')].map(c =>"
        "   ({chart: c.dataset.chart, width: w(c), column: w(c.closest('section'))})),"
        "  zero: [...document.querySelectorAll('svg[data-chart=by_difficulty] rect.bar')]"
        "   .filter(r => Number(r.dataset.value) === 0).map(w)}; })()"
    )
    assert len(widths["rates"]) == 5 and widths["scripted"]
    for chart in widths["rates"]:
        assert chart["width"] >= 0.8 * widths["page"], (chart, widths["page"])
        assert chart["full"] >= 0.6 * widths["page"], (chart, widths["page"])  # a 100 % bar
    for chart in widths["scripted"]:
        assert chart["width"] >= 0.95 * chart["column"], chart
    assert len(widths["zero"]) == 2 and all(w >= 2 for w in widths["zero"]), widths["zero"]


def test_report_of_a_missing_run_names_the_fix(tmp_path):
    proc = _report_cli(str(tmp_path / "nope"))
    assert proc.returncode == 2 and "no results.db" in proc.stderr
    assert proc.stderr.startswith("error: ") and len(proc.stderr.splitlines()) == 1


async def test_large_runs_embed_the_first_trajectories_only(two_runs):
    from palaestra.run.report import run_data

    strong, _ = two_runs
    data = await asyncio.to_thread(run_data, strong, 4000, 3)
    embedded = [e for e in data["episodes"] if e["turns"] is not None]
    assert len(data["episodes"]) == 8 and [e["id"] for e in embedded] == [1, 2, 3]
    assert all(len(e["turns"]) == e["steps"] for e in embedded)
    everything = await asyncio.to_thread(run_data, strong, 4000, -1)
    assert all(e["turns"] is not None for e in everything["episodes"])


async def test_a_failed_episode_cut_by_a_limit_shows_the_limit_as_its_status(tmp_path):
    """The store keeps status (failed) and end reason (step_limit) apart; the episode table
    shows such an episode's status as the limit, as it did when the store mixed the two (the
    run here is a store written then, migrated when the report reads it)."""
    from palaestra.run.report import write_report
    from tests.run.test_store import _old_store

    report = await asyncio.to_thread(
        write_report, [_old_store(tmp_path / "old")], tmp_path / "report.html"
    )
    browser, page = await _page(tmp_path)
    try:
        await _open(page, report)
        shown = await page.js(
            "Object.fromEntries([...document.querySelectorAll('#episodes tr.episode')]"
            ".map(r => [r.cells[0].textContent, r.cells[2].textContent]))"
        )
        assert shown == {
            "t-pass": "passed",
            "t-fail": "failed",
            "t-timeout": "agent_timeout",
            "t-steps": "step_limit",
            "t-trunc-pass": "passed",
            "t-crash": "failed",
            "t-verifier": "error",
            "t-policy": "error",
        }
        options = await page.js(
            "[...document.querySelectorAll('#filter-status option')].map(o => o.value)"
        )
        assert options == ["", "agent_timeout", "error", "failed", "passed", "step_limit"]
        status = await page.js(
            "(() => { [...document.querySelectorAll('#episodes tr.episode')]"
            "   .find(r => r.cells[0].textContent === 't-steps').click();"
            " return document.getElementById('viewer-status').textContent; })()"
        )
        assert status == "step_limit"
        assert page.errors() == []
    finally:
        await _close(browser, page)
