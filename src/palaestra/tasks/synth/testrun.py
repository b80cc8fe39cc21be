"""Running a project's tests during synthesis: one pytest run, its report, the reliable tests.

Every run is pytest in the project's venv (:mod:`.environment`) on a copy of the project, with
the plugin :mod:`palaestra_synth_pytest` (selection by node id, one JSON report), no network
(``unshare -n`` when this process may), no bytecode written (a stale ``.pyc`` would hide a
mutation of the same size), the project's ``addopts`` cleared (coverage, xdist or random-order
options the venv may lack) and a timeout that kills the run's whole process group.

:func:`baseline` runs the whole suite twice, the first time tracing which of the project's
functions each test calls: a test is *reliable* when it passed both times, and the trace is the
coverage map that picks the tests a mutation can affect.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from palaestra.tasks.synth.environment import ProjectVenv
from palaestra.tasks.synth.errors import SynthError
from palaestra.tasks.synth.project import Project

PLUGIN = Path(__file__).with_name("palaestra_synth_pytest.py")
#: The options every run passes (test.sh passes the same).
PYTEST_OPTIONS = (
    "-p",
    "palaestra_synth_pytest",
    "-p",
    "no:cacheprovider",
    "-p",
    "no:randomly",
    "-p",
    "no:xdist",
    "-p",
    "no:cov",
    "-o",
    "addopts=",
    "-q",
    "--tb=short",
    "-rN",
)


@dataclass
class Report:
    """What one run said: outcomes by node id, failure messages, collection errors."""

    outcomes: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    errors: list[dict] = field(default_factory=list)
    collected: list[str] = field(default_factory=list)
    calls: dict[str, list[list]] = field(default_factory=dict)
    timed_out: bool = False
    seconds: float = 0.0
    output: str = ""

    def failing(self) -> list[str]:
        return sorted(n for n, o in self.outcomes.items() if o in ("failed", "error"))

    def passing(self) -> list[str]:
        return sorted(n for n, o in self.outcomes.items() if o == "passed")


def _can_unshare() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


_UNSHARE: list[bool] = []


def run_pytest(
    environment: ProjectVenv,
    project: Project,
    tree: Path,
    files: list[str],
    *,
    select: list[str] | None = None,
    trace: bool = False,
    timeout: float = 900.0,
) -> Report:
    """Run pytest on ``files`` of the project copy at ``tree`` (only ``select`` when given)."""
    if not _UNSHARE:
        _UNSHARE.append(_can_unshare())
    with tempfile.TemporaryDirectory(prefix="palaestra-synth-") as scratch:
        run = Path(scratch)
        shutil.copy(PLUGIN, run / PLUGIN.name)
        report_path = run / "report.json"
        env = {
            "PATH": f"{environment.venv}/bin:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(run),
            "TMPDIR": str(run),
            "LANG": "C.UTF-8",
            "PYTHONPATH": f"{tree / project.import_root}:{run}",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
            "PALAESTRA_SYNTH_REPORT": str(report_path),
        }
        if select is not None:
            (run / "select.txt").write_text("".join(f"{n}\n" for n in select))
            env["PALAESTRA_SYNTH_SELECT"] = str(run / "select.txt")
        if trace:
            env["PALAESTRA_SYNTH_TRACE"] = str(tree)
        command = [str(environment.python), "-B", "-m", "pytest", *PYTEST_OPTIONS, *files]
        if _UNSHARE[0]:
            command = ["unshare", "-n", *command]
        start = time.monotonic()
        proc = subprocess.Popen(
            command,
            cwd=tree,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        timed_out = False
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # what the tests left running
            except ProcessLookupError:
                pass
        text = out.decode(errors="replace")
        report = Report(timed_out=timed_out, seconds=time.monotonic() - start, output=text[-4000:])
        if report_path.is_file():
            data = json.loads(report_path.read_text())
            report.outcomes, report.messages = data["outcomes"], data["messages"]
            report.errors, report.collected = data["errors"], data["collected"]
            report.calls = data.get("calls", {})
        return report


@dataclass
class Baseline:
    """The suite on the unchanged project: reliable tests and which functions each calls."""

    reliable: list[str]
    flaky: list[str]
    failing: list[str]
    calls: dict[str, list[list]]
    seconds: float
    files: list[str]

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.__dict__) + "\n")

    @classmethod
    def load(cls, path: Path) -> Baseline:
        return cls(**json.loads(path.read_text()))


def test_files(project: Project) -> list[str]:
    return [t for t in project.tests if not t.endswith("conftest.py")]


def baseline(environment: ProjectVenv, project: Project, tree: Path, work: Path) -> Baseline:
    """Run the suite twice (once traced); a second call reads the first's record."""
    saved = work / "baseline.json"
    if saved.is_file():
        return Baseline.load(saved)
    files = test_files(project)
    first = run_pytest(environment, project, tree, files, trace=True, timeout=1800)
    if not first.collected:
        problem = (
            first.errors[0]["message"].strip().splitlines()[-1]
            if first.errors
            else (first.output.strip().splitlines() or ["no output"])[-1]
        )
        raise SynthError(
            f"the test suite of {project.name} {project.version} runs no test here: {problem}",
            fix="pick a project whose tests run offline with pytest",
        )
    broken = sorted({e["nodeid"] for e in first.errors})
    if broken:
        # pytest runs no test at all after a collection error: without the files that cannot
        # be collected (a test module importing what the venv lacks), the traced run again
        files = [f for f in files if f not in broken]
        first = run_pytest(environment, project, tree, files, trace=True, timeout=1800)
    second = run_pytest(environment, project, tree, files, timeout=1800)
    passed = set(first.passing()) & set(second.passing())
    flaky = set(first.passing()) ^ set(second.passing())
    record = Baseline(
        reliable=sorted(passed),
        flaky=sorted(flaky),
        failing=sorted(set(first.failing()) | set(second.failing())),
        calls={n: c for n, c in first.calls.items() if n in passed},
        seconds=second.seconds,
        files=files,
    )
    if not record.reliable:
        raise SynthError(
            f"no test of {project.name} {project.version} passes reliably here "
            f"({len(record.failing)} fail, {len(record.flaky)} flaky)",
            fix="pick a project whose tests pass offline on Python 3.11",
        )
    record.save(saved)
    return record
