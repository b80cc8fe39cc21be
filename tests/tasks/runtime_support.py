"""Running a script the way test.sh runs a generated task's checker: the hidden tests' runtime
in a directory of a sandbox, the script launched through ``palaestra_launch.py`` as root."""

from __future__ import annotations

import asyncio
import json

from palaestra.sandbox import SandboxSpec
from palaestra.sandbox.base import Sandbox
from palaestra.sandbox.local import LocalBackend
from palaestra.tasks.generators.base import CHECK_RUNTIME


async def run_with_runtime(
    sandbox: Sandbox, script: str, directory: str = "/tmp/rt", alarm: int | None = None
) -> dict:
    """Run ``script`` beside the runtime in ``directory`` (``alarm``: launched with
    ``--alarm``, as test.sh launches a checker); the JSON object its last line of output
    holds."""
    for path in CHECK_RUNTIME:
        await sandbox.upload(path, f"{directory}/{path.name}")
    await sandbox.write_file(f"{directory}/run.py", script)
    alarmed = ["--alarm", str(alarm)] if alarm is not None else []
    launch = ["python3", "-E", "-s", "-S", "-B", "palaestra_launch.py", *alarmed, "run.py"]
    res = await sandbox.exec(launch, cwd=directory, timeout=120)
    assert res.ok, res.output
    return json.loads(res.stdout.strip().splitlines()[-1])


def run_in_a_local_sandbox(script: str, alarm: int | None = None) -> dict:
    """:func:`run_with_runtime` in a fresh local sandbox, from synchronous code (a fixture)."""

    async def run() -> dict:
        backend = LocalBackend()
        try:
            async with await backend.create(SandboxSpec()) as sandbox:
                return await run_with_runtime(sandbox, script, alarm=alarm)
        finally:
            await backend.aclose()

    return asyncio.run(run())
