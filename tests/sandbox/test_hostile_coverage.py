"""Bookkeeping of issue 28, item 6: the hostile suite covers each class of attack the issue names,
on both backends, and none of it may be skipped in CI.

:data:`HOSTILE_CLASSES` names, for each class, the hostile tests that hold it. This test collects
the hostile suite as pytest does and fails when a class has no test, when a named test does not
exist, or when one does not run on both the local backend and Docker (the conftest ``backend``
fixture, directly or through ``limited``: its ``docker`` parameter carries the ``docker`` mark,
which ``PALAESTRA_REQUIRE_DOCKER=1`` in CI turns from a skip into a failure). A hostile test for a
new class goes in the suite and is named here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUITE = ("tests/sandbox/test_hostile.py", "tests/sandbox/test_hostile_rewards.py")

#: Issue 28's classes of attack (its "What must work" items 1 to 5) and the hostile tests that
#: hold each, by function name.
HOSTILE_CLASSES: dict[str, tuple[str, ...]] = {
    "1. at least Docker's defaults (/proc/sys, masked paths, mounts, devices)": (
        "test_kernel_tunables_are_read_only",
        "test_escapes_through_proc_and_sys",
    ),
    "2. the agent's root is not the host's root": (),
    "3. no process survives the boundary (the image's service included)": (),
    "4. the helper survives any cgroup the agent makes": (),
    "5. fair CPU between sandboxes": (),
}


def collected_ids() -> dict[str, set[str]]:
    """The parameter ids pytest collects for each test function of the hostile suite."""
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    out = subprocess.run(
        [*argv, *SUITE], cwd=ROOT, capture_output=True, text=True, env=os.environ.copy()
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    ids: dict[str, set[str]] = defaultdict(set)
    for line in out.stdout.splitlines():
        if "::" in line:
            name = line.split("::", 1)[1]
            function, _, params = name.partition("[")
            ids[function].add(params.rstrip("]"))
    return ids


def test_each_class_of_issue_28_is_attacked_on_both_backends() -> None:
    ids = collected_ids()
    problems = []
    for klass, tests in HOSTILE_CLASSES.items():
        if not tests:
            problems.append(f"{klass}: no hostile test names it yet")
        for test in tests:
            params = ids.get(test)
            if not params:
                problems.append(f"{klass}: {test} is not in the hostile suite")
                continue
            backends = {p.split("-", 1)[0] for p in params}
            if not {"local", "docker"} <= backends:
                problems.append(f"{klass}: {test} runs on {sorted(backends)}, not local and docker")
    assert not problems, (
        "issue 28's hostile suite is incomplete (add each test to "
        + " or ".join(SUITE)
        + ", on the conftest `backend` fixture, and name it in HOSTILE_CLASSES):\n"
        + "\n".join(problems)
    )
