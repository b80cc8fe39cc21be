"""The test ids of a synthesised project as its tasks' verifier names them: collected from the
original source in a local sandbox of the project's image (``palaestra.tasks.synth.portable``
says why they may differ from the baseline's)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from palaestra.sandbox import SandboxSpec, make_backend
from palaestra.sandbox.images import export_rootfs
from palaestra.tasks.synth.environment import VENV
from palaestra.tasks.synth.project import Project
from palaestra.tasks.synth.testrun import PYTEST_OPTIONS

#: Where the original source goes in the sandbox for the collection.
SOURCE = "/tmp/palaestra-source"


async def collected(project: Project, image: str, *, timeout: float = 600.0) -> set[str]:
    """The test ids pytest collects from ``project``'s original source in a local sandbox of
    ``image``, with the verifier's interpreter, options and ``PYTHONHASHSEED``."""
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


def collect(project: Project, image: str) -> set[str]:
    """:func:`collected`, from synchronous code (the pipeline's ``Options.collect``)."""
    return asyncio.run(collected(project, image))
