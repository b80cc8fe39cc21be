"""Synthesised tasks vetted where their verifier runs: in a local sandbox of the project's image,
on the original source, with the verifier's interpreter and options. A task is dropped when

* its tests name an id that interpreter does not collect (``unportable-ids``). A parametrised
  test's id may hold an index in an order the interpreter's binary decides: a set of tuples
  holding ``None`` or a builtin type iterates in an order of their hashes, which on CPython
  before 3.12 are those objects' addresses, fixed by the binary's layout. The baseline runs on
  the host's ``/usr/bin/python3``, the verifier on the image's, another build of the same
  version: isodate's ``test_parse[4-1985-04-expected8-%Y-%m]`` on one is ``...-expected23-...``
  on the other;
* its tests, run alone as its verifier runs them, do not all pass on the original source
  (``fails-alone``): a test that needs an earlier one (pathspec's link tests read a class
  attribute its first link test sets).

Either way its oracle could never pass. The pipeline is handed :func:`vet` (``Options.vet``:
the tasks layer may not import the sandbox); ``scripts/synth-vet.py`` vetted the shipped
manifests."""

from __future__ import annotations

import asyncio
from pathlib import Path

from palaestra.sandbox import SandboxSpec, make_backend
from palaestra.sandbox.images import export_rootfs
from palaestra.tasks.synth.environment import VENV
from palaestra.tasks.synth.manifest import Bug
from palaestra.tasks.synth.project import Project
from palaestra.tasks.synth.testrun import PYTEST_OPTIONS

#: Where the original source goes in the sandbox for the collection.
SOURCE = "/tmp/palaestra-source"


async def vetted(
    project: Project, image: str, bugs: list[Bug], *, timeout: float = 600.0
) -> dict[str, str]:
    """``{bug id: why it is dropped}`` (``unportable-ids``, ``fails-alone``) of ``bugs``."""
    at = PYTEST_OPTIONS.index("palaestra_synth_pytest")  # its report plugin: not needed here
    options = [*PYTEST_OPTIONS[: at - 1], *PYTEST_OPTIONS[at + 1 :]]
    pythonpath = f"{SOURCE}/{project.import_root}" if project.import_root else SOURCE
    env = {"PYTHONPATH": pythonpath, "PYTHONHASHSEED": "0", "HOME": "/tmp"}
    pytest = [f"{VENV}/bin/python", "-B", "-m", "pytest", *options]
    rootfs = await export_rootfs(image)  # as the task's sandbox runs on it (local backend)
    spec = SandboxSpec(rootfs=rootfs.path, env=dict(rootfs.config.env), workdir="/tmp")
    backend = make_backend("local")
    dropped: dict[str, str] = {}
    try:
        async with await backend.create(spec) as sandbox:
            await sandbox.upload(Path(project.root), SOURCE)
            res = await sandbox.exec(
                [*pytest, "--collect-only", *project.tests], cwd=SOURCE, env=env, timeout=timeout
            )
            ids = {line.strip() for line in res.stdout.splitlines() if "::" in line}
            if not ids:
                raise RuntimeError(f"pytest collected nothing in {image}: {res.output[-500:]}")
            dropped.update(dict.fromkeys(unportable(bugs, ids), "unportable-ids"))
            for bug in bugs:
                if bug.id in dropped:
                    continue
                tests = sorted(set(bug.fail_to_pass) | set(bug.pass_to_pass))
                res = await sandbox.exec([*pytest, *tests], cwd=SOURCE, env=env, timeout=timeout)
                if not res.ok:
                    dropped[bug.id] = "fails-alone"
    finally:
        await backend.aclose()
    return dropped


def unportable(bugs: list[Bug], ids: set[str]) -> list[str]:
    """The ids of ``bugs`` whose tests name an id not in ``ids``."""
    return [b.id for b in bugs if not set(b.fail_to_pass) | set(b.pass_to_pass) <= ids]


def vet(project: Project, image: str, bugs: list[Bug]) -> dict[str, str]:
    """:func:`vetted`, from synchronous code (the pipeline's ``Options.vet``)."""
    return asyncio.run(vetted(project, image, bugs))
