"""Test ids as the verifier's interpreter names them (a task is kept only when they match).

A parametrised test's id may hold an index in an order the interpreter's binary decides: a set
of tuples holding ``None`` or a builtin type iterates in an order of their hashes, which on
CPython before 3.12 are those objects' addresses, fixed by the binary's layout. The baseline
runs on the host's ``/usr/bin/python3``; the verifier on the image's, which is another build of
the same version (Debian's point releases): isodate's ``test_parse[4-1985-04-expected8-%Y-%m]``
on one is ``...-expected23-...`` on the other, and a task whose tests name it can never pass
(``not run``). :func:`collected` lists what pytest collects from the original source in the
project's own image, as the verifier runs it; :func:`unportable` gives the bugs whose tests
name an id it does not, which the pipeline drops (and ``benchmarks/synth_ids.py`` from the
shipped manifests).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from palaestra.tasks.synth.environment import VENV
from palaestra.tasks.synth.project import Project

#: Where the original source goes in the sandbox for the collection.
SOURCE = "/tmp/palaestra-source"


async def collected(project: Project, image: str, *, timeout: float = 600.0) -> set[str]:
    """The test ids pytest collects from ``project``'s original source in a local sandbox of
    ``image``, with the verifier's interpreter, options and ``PYTHONHASHSEED``."""
    from palaestra.sandbox import SandboxSpec, make_backend
    from palaestra.sandbox.images import export_rootfs
    from palaestra.tasks.synth.testrun import PYTEST_OPTIONS

    at = PYTEST_OPTIONS.index("palaestra_synth_pytest")  # its report plugin: not needed here
    options = [*PYTEST_OPTIONS[: at - 1], *PYTEST_OPTIONS[at + 1 :]]
    pythonpath = f"{SOURCE}/{project.import_root}" if project.import_root else SOURCE
    rootfs = await export_rootfs(image)  # as the task's sandbox runs on it (local backend)
    spec = SandboxSpec(rootfs=rootfs.path, env=dict(rootfs.config.env), workdir="/tmp")
    backend = make_backend("local")
    try:
        async with await backend.create(spec) as sandbox:
            await sandbox.upload(Path(project.root), SOURCE)
            argv = [f"{VENV}/bin/python", "-B", "-m", "pytest", "--collect-only"]
            res = await sandbox.exec(
                [*argv, *options, *project.tests],
                cwd=SOURCE,
                env={"PYTHONPATH": pythonpath, "PYTHONHASHSEED": "0", "HOME": "/tmp"},
                timeout=timeout,
            )
    finally:
        await backend.aclose()
    ids = {line.strip() for line in res.stdout.splitlines() if "::" in line}
    if not ids:
        raise RuntimeError(f"pytest collected nothing in {image}: {res.output[-500:]}")
    return ids


def unportable(bugs: Iterable, ids: set[str]) -> list[str]:
    """The ids of ``bugs`` (``manifest.Bug``) whose tests name an id not in ``ids``."""
    return [b.id for b in bugs if not set(b.fail_to_pass) | set(b.pass_to_pass) <= ids]
