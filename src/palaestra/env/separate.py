"""Harbor's separate verifier: the tests run in a sandbox of their own, on the agent's artifacts.

For a task whose verifier runs apart (``[verifier] environment_mode = "separate"``, or a
``[verifier.environment]``; :mod:`palaestra.tasks.verifier_env`), the end of an episode goes as
in Harbor 0.26's ``Trial._run_separate_verifier``:

1. every agent process is killed, then the *artifacts* are copied out of the agent's sandbox:
   ``/logs/artifacts`` and each ``artifacts = [...]`` entry of ``task.toml`` (a file, or a
   directory without the names its ``exclude`` patterns match, as ``tar --exclude`` does).
   The copy is data: symbolic links leaving the artifact, special files and set-id bits are
   dropped (tar's ``data`` filter); an entry that is missing, or is itself a link, is skipped;
2. the agent's sandbox is closed: nothing else of it (processes, changes to the system, a
   planted reward or test file) exists any more;
3. a fresh sandbox starts from the verifier's image (``tests/Dockerfile``, the verifier's
   ``docker_image``, or the agent's environment afresh); each artifact is put back at its
   ``source`` path (a directory replaces what the image had there);
4. the verifier runs there with the usual phase boundary (:mod:`palaestra.verify.boundary`),
   then that sandbox is closed too.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from palaestra.env.collect import collected_artifacts, copy_artifact, copy_name
from palaestra.sandbox.base import Sandbox, SandboxBackend, SandboxSpec
from palaestra.tasks import Task
from palaestra.verify.harbor import VerifierResult
from palaestra.verify.protocol import Verifier


async def verify_separately(
    task: Task,
    agent_sandbox: Sandbox,
    backend: SandboxBackend,
    spec: SandboxSpec,
    verifier: Verifier,
) -> VerifierResult:
    """Steps 1 to 4 of the module doc; closes ``agent_sandbox``. ``spec`` is the verifier's
    sandbox (:func:`palaestra.env.sandbox_spec.prepare_verifier_spec`)."""
    await agent_sandbox.kill_all(restart_service=False)  # nothing runs while copying
    staging = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="palaestra-artifacts-"))
    try:
        entries = collected_artifacts(task, agent_sandbox.spec.workdir)
        copied = []
        for i, entry in enumerate(entries):
            copy = staging / str(i) / copy_name(entry)
            copied.append(copy if await copy_artifact(agent_sandbox, entry, copy) else None)
        await agent_sandbox.close()
        async with await backend.create(spec) as sandbox:
            for entry, copy in zip(entries, copied, strict=True):
                if copy is not None:
                    await _put_back(sandbox, copy, entry.source)
            return await verifier.verify(task, sandbox)
    finally:
        await asyncio.to_thread(shutil.rmtree, staging, ignore_errors=True)


async def _put_back(sandbox: Sandbox, copy: Path, target: str) -> None:
    if await asyncio.to_thread(copy.is_dir):  # as Harbor: it replaces the directory's contents
        await sandbox.exec(
            ["sh", "-c", 'mkdir -p -- "$1" && find "$1" -mindepth 1 -delete', "sh", target],
            timeout=60,
        )
    await sandbox.upload(copy, target)
