"""Bookkeeping of issue 28, item 6 (and issue 29's jail): the hostile suite covers each class of
attack the issues name, on both backends, and none of it may be skipped in CI.

:data:`HOSTILE_CLASSES` names, for each class, the hostile tests that hold it. This test collects
the hostile suite as pytest does and fails when a named test does not exist, or when a class's
tests do not run on both the local backend and Docker between them (the conftest ``backend``
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

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUITE = (
    "tests/sandbox/test_hostile.py",
    "tests/sandbox/test_hostile_rewards.py",
    "tests/sandbox/test_hostile_ids.py",
    "tests/sandbox/test_hostile_jail.py",
)
#: Hostile tests outside the suite's ``backend`` fixture, with the backends they attack: the
#: service's injection needs a service (Docker's image entrypoint; the helpers under bwrap
#: directly on local, which refuses ENTRYPOINT), Docker's remapped root needs its own engine,
#: and the helper's cgroup tests need the local backend's cgroups, which the agent cannot reach
#: on either backend (test_no_cgroup_can_be_made_or_joined).
OUTSIDE = {
    "tests/sandbox/test_service_boundary.py": {
        "test_kill_all_kills_the_service_and_what_was_injected_into_it": {"local"},
        "test_docker_kill_all_kills_the_service_and_starts_it_again": {"docker"},
        "test_docker_episode_a_process_injected_into_the_service_cannot_score": {"docker"},
    },
    "tests/sandbox/test_docker_remap.py": {
        "test_root_inside_is_an_unprivileged_uid_outside": {"docker"},
    },
    "tests/sandbox/test_local_cgroups.py": {
        "test_a_timed_out_command_in_cgroups_of_its_own_is_killed": {"local"},
        "test_kill_all_reaches_cgroups_below_a_finished_command": {"local"},
    },
}

#: Issue 28's classes of attack (its "What must work" items 1 to 5) and the hostile tests that
#: hold each, by function name.
HOSTILE_CLASSES: dict[str, tuple[str, ...]] = {
    "1. at least Docker's defaults (/proc/sys, masked paths, mounts, devices)": (
        "test_kernel_tunables_are_read_only",
        "test_escapes_through_proc_and_sys",
    ),
    "2. the agent's root is not the host's root": (
        "test_root_inside_is_the_ranges_first_uid_outside",
        "test_root_inside_is_an_unprivileged_uid_outside",
    ),
    "3. no process survives the boundary (the image's service included)": (
        "test_kill_all_kills_the_service_and_what_was_injected_into_it",
        "test_docker_kill_all_kills_the_service_and_starts_it_again",
        "test_docker_episode_a_process_injected_into_the_service_cannot_score",
        "test_daemon_rewriting_the_reward",
    ),
    "4. the helper survives any cgroup the agent makes": (
        "test_no_cgroup_can_be_made_or_joined",
        "test_a_timed_out_command_in_cgroups_of_its_own_is_killed",
        "test_kill_all_reaches_cgroups_below_a_finished_command",
    ),
    "5. fair CPU between sandboxes": ("test_each_sandbox_has_a_cpu_weight_of_its_own",),
    # issue 29's classes: the jail of agent code at verify time
    "29.1 CPU bars count the whole process tree (fork relay, orphans)": (
        "test_fork_relay_over_a_cpu_bar",
        "test_starter_cpu_bar_attacked",
    ),
    "29.2 nothing a run could write is read later (inputs, the reference)": (
        "test_starter_cpu_bar_attacked",
        "test_reference_package_swapped",
    ),
    "29.3 outputs are read without following links (links, FIFOs)": (
        "test_fifo_and_link_planted_as_outputs",
    ),
}


def collected_ids() -> dict[str, set[str]]:
    """The parameter ids pytest collects for each test function of the hostile suite and of
    the files of :data:`OUTSIDE`."""
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    out = subprocess.run(
        [*argv, *SUITE, *OUTSIDE], cwd=ROOT, capture_output=True, text=True, env=os.environ.copy()
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    ids: dict[str, set[str]] = defaultdict(set)
    for line in out.stdout.splitlines():
        if "::" in line:
            name = line.split("::", 1)[1]
            function, _, params = name.partition("[")
            ids[function].add(params.rstrip("]"))
    return ids


def backends_of(test: str, params: set[str]) -> set[str]:
    """The backends a collected test attacks: declared in :data:`OUTSIDE`, or its ``backend``
    fixture's parameters (``local``, ``local-python``, ``docker``)."""
    for declared in OUTSIDE.values():
        if test in declared:
            return declared[test]
    return {p.split("-", 1)[0] for p in params}


@pytest.mark.slow
def test_each_class_of_issue_28_is_attacked_on_both_backends() -> None:
    ids = collected_ids()
    problems = []
    for klass, tests in HOSTILE_CLASSES.items():
        covered: set[str] = set()
        for test in tests:
            params = ids.get(test)
            if not params:
                problems.append(f"{klass}: {test} is not in the hostile suite")
                continue
            covered |= backends_of(test, params)
        if not {"local", "docker"} <= covered:
            problems.append(f"{klass}: its tests run on {sorted(covered)}, not local and docker")
    assert not problems, (
        "issue 28's hostile suite is incomplete (add each test to "
        + " or ".join(SUITE)
        + ", on the conftest `backend` fixture, and name it in HOSTILE_CLASSES):\n"
        + "\n".join(problems)
    )
