"""Shared by the Docker tests: whether an engine is here, and counting palaestra's containers.

Tests that need the engine carry ``pytest.mark.docker`` and ``requires_docker``: they skip with
the how-to when there is none, and tests/conftest.py turns such a skip into a failure when
``PALAESTRA_REQUIRE_DOCKER=1`` or ``CI=true`` (as ``.ci/run`` sets).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import pytest

from palaestra.sandbox.docker import docker_unavailable
from palaestra.sandbox.docker_janitor import OWNER_LABEL, owner_label


@functools.cache
def unavailable_reason() -> str | None:
    """Why Docker tests cannot run here (asked once per session, before any event loop)."""
    return asyncio.run(docker_unavailable())


P = ParamSpec("P")
R = TypeVar("R")

requires_docker = [
    pytest.mark.docker,
    pytest.mark.skipif(
        unavailable_reason() is not None, reason=f"Docker tests skipped: {unavailable_reason()}"
    ),
]


def needs_docker(test: Callable[P, R]) -> Callable[P, R]:
    """Mark one test with :data:`requires_docker`."""
    for mark in requires_docker:
        test = mark(test)
    return test


async def labelled_containers(label: str | None = None) -> list[str]:
    """Ids of every container (running or not) carrying ``label``, from the docker CLI.

    By default: the containers this test process owns (other processes may share the engine).
    """
    label = label or f"{OWNER_LABEL}={owner_label()}"
    proc = await asyncio.create_subprocess_exec(
        "docker",
        "ps",
        "-aq",
        "--no-trunc",
        "--filter",
        f"label={label}",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    return out.decode().split()
