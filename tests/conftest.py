"""Shared fixtures: a factory for Harbor task directories written into tmp_path, and a leak
check after every test.

The leak check looks only at what this test process owns: its descendant processes, bwrap
processes naming its temp dirs or its default backend's run directory (orphans included), docker
containers and snapshot images whose owner is this process or one started below it, local
snapshots in its default backend's run directory or a test's ``state`` directory, cgroups of the
sandbox tests' run ids (:data:`tests.procs.RUN_PREFIX`) and of the process's default local
backend, mounts under pytest's temp dirs. So other test runs on the same machine cannot make it
fail.

Also: in CI (``PALAESTRA_REQUIRE_DOCKER=1`` or ``CI=true``, as ``.ci/run`` sets), every
skipped test is reported as a failure, unless it is marked ``ci_may_skip(reason=...)``, naming why
it cannot run there: CI installs everything the suite needs, so a skip there hides a gap.
"""

from __future__ import annotations

import glob
import os
import signal
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.procs import (
    RUN_PREFIX,
    descendants,
    own_containers,
    own_snapshot_images,
    sandbox_cgroups,
    sandbox_processes,
    tmpfs_mounts_under,
)

REQUIRE_DOCKER = (
    os.environ.get("PALAESTRA_REQUIRE_DOCKER") == "1" or os.environ.get("CI", "").lower() == "true"
)


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    return str(longrepr[2] if isinstance(longrepr, tuple) else longrepr)


def _fail_a_skip(report: pytest.TestReport | pytest.CollectReport, reason: str) -> None:
    report.outcome = "failed"
    report.longrepr = (
        f"skipped in CI (PALAESTRA_REQUIRE_DOCKER=1 or CI=true), where every test must run: "
        f"{reason} (a test that cannot run there says why with "
        f"@pytest.mark.ci_may_skip(reason=...))"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """In CI every skip is a failure, unless the test is marked ``ci_may_skip`` with the
    reason it cannot run there; an expected failure (a known, documented gap) is not a skip."""
    outcome = yield
    report = outcome.get_result()
    if not REQUIRE_DOCKER or not report.skipped or hasattr(report, "wasxfail"):
        return
    if item.get_closest_marker("ci_may_skip") is None:
        _fail_a_skip(report, _skip_reason(report))


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """A module skipped whole at import (``pytest.importorskip``: a missing extra) fails in
    CI the same way."""
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_DOCKER and report.skipped:
        _fail_a_skip(report, _skip_reason(report))


def pytest_configure(config: pytest.Config) -> None:
    """A runner started in the background of a script (``cmd &`` without job control, which
    CI wrappers do) hands its children SIGINT ignored, and Python then never raises
    KeyboardInterrupt: the tests that stop a CLI or a sandbox owner with Ctrl-C would wait in
    vain. Children of this process start with SIGINT at its default again."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _leaks(tmp_root: str) -> dict[str, list[str]]:
    from palaestra.sandbox import default_backend

    local = default_backend("local")
    default_run = getattr(local, "run_id", RUN_PREFIX)
    default_dir = str(getattr(local, "state_dir", tmp_root)) + f"/{default_run}/"
    return {
        "processes": [cmd for cmd in descendants(os.getpid()) if cmd],
        # an orphan (its parent killed) is no longer a descendant: it still names its sandbox
        "orphans": sandbox_processes(tmp_root + "/") + sandbox_processes(default_dir),
        "containers": own_containers(),
        "snapshots": own_snapshot_images()
        + glob.glob(f"{default_dir}snap-*")
        + glob.glob(f"{tmp_root}/*/state/*/snap-*"),
        "cgroups": sandbox_cgroups(RUN_PREFIX) + sandbox_cgroups(default_run),
        "mounts": tmpfs_mounts_under(tmp_root),
    }


@pytest.fixture
def tmp_path(tmp_path: Path) -> Path:
    """pytest's tmp_path, traversable by others (mode 0711 up from /tmp): local sandboxes
    bind directories of a state directory made in it, and bubblewrap runs as the sandboxes'
    unprivileged uid, which must reach them (see LocalBackend)."""
    for path in (tmp_path, *tmp_path.parents):
        if path == Path(tempfile.gettempdir()) or path == path.parent:
            break
        path.chmod(path.stat().st_mode | 0o011)
    return tmp_path


@pytest.fixture(autouse=True)
def no_leaks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """After each test: no process, container, snapshot, sandbox cgroup or quota mount left
    behind."""
    tmp_root = str(tmp_path_factory.getbasetemp())
    before = _leaks(tmp_root)
    yield
    deadline = time.monotonic() + 10.0  # what a test killed may take a moment to vanish
    while True:
        after = _leaks(tmp_root)
        new = {k: sorted(set(v) - set(before[k])) for k, v in after.items()}
        if not any(new.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not any(new.values()), f"left behind: {new}"


TASK_TOML = """\
version = "1.0"

[metadata]
difficulty = "{difficulty}"
category = "{category}"
tags = ["test"]

[verifier]
timeout_sec = {verifier_timeout}

[agent]
timeout_sec = {agent_timeout}
"""

MakeTask = Callable[..., Path]


@pytest.fixture
def make_task(tmp_path: Path) -> MakeTask:
    """Write a Harbor task directory and return its path.

    The default task asks for ``/app/answer.txt`` holding ``42``; its test writes reward.txt.
    """

    def factory(
        name: str = "answer-task",
        *,
        instruction: str = "Write the number 42 to /app/answer.txt.",
        test_sh: str = """\
            if [ "$(cat /app/answer.txt 2>/dev/null)" = "42" ]; then echo 1 > /logs/verifier/reward.txt
            else echo 0 > /logs/verifier/reward.txt; fi
            """,
        solve_sh: str | None = "echo 42 > /app/answer.txt\n",
        dockerfile: str = "FROM debian:bookworm-slim\nWORKDIR /app\n",
        files: dict[str, str] | None = None,
        difficulty: str = "easy",
        category: str = "testing",
        verifier_timeout: float = 60.0,
        agent_timeout: float = 600.0,
        root: Path | None = None,
        extra_toml: str = "",
    ) -> Path:
        task = (root or tmp_path / "tasks") / name
        (task / "environment").mkdir(parents=True)
        (task / "tests").mkdir()
        (task / "task.toml").write_text(
            TASK_TOML.format(
                difficulty=difficulty,
                category=category,
                verifier_timeout=verifier_timeout,
                agent_timeout=agent_timeout,
            )
            + extra_toml
        )
        (task / "instruction.md").write_text(instruction + "\n")
        (task / "environment" / "Dockerfile").write_text(dockerfile)
        for rel, content in (files or {}).items():
            path = task / "environment" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        (task / "tests" / "test.sh").write_text("#!/bin/bash\n" + textwrap.dedent(test_sh))
        if solve_sh is not None:
            (task / "solution").mkdir()
            (task / "solution" / "solve.sh").write_text("#!/bin/bash\n" + textwrap.dedent(solve_sh))
        return task

    return factory


def bash_action(command: str) -> str:
    """A response in the bash scaffold's format."""
    return f"Let me run this.\n\n```bash\n{command}\n```"


SUBMIT_ACTION = bash_action("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")
