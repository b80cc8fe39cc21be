"""Harbor's collection at the end of an agent's run: collect hooks, then the artifacts kept.

As Harbor 0.26's ``Trial._collect_artifacts_phased``, after the agent's run and before the
verifier (in a multi-step task: after each step's agent, with the step's own hooks and
artifacts added to the task's):

1. each ``[[verifier.collect]]`` hook runs in the sandbox (``bash -c``) as its ``user`` (root
   by default) within its ``timeout_sec``, while the image's service still runs, so that it can
   snapshot runtime state into files. Best effort, as in Harbor: a hook that fails or times out
   is recorded (``hooks.json``), never ends the episode;
2. with a destination (a run's ``RUN_DIR/episodes/<episode-id>/``, made by ``evaluate``), every
   agent process is killed (the service is started again for the verifier), then each artifact
   is copied out as data: ``/logs/artifacts``, then each ``artifacts`` entry, to Harbor's host
   path under ``artifacts/`` (``destination``, else the source path without its leading ``/``;
   a step's under ``steps/<name>/artifacts/``), with ``manifest.json`` listing each entry's
   ``status``: ``ok``, ``empty`` (an empty directory), ``failed`` (missing, or a link) or
   ``skipped`` (its place overlaps an earlier entry's, which is kept).

The copy is :func:`copy_artifact`'s, which the separate verifier uses too
(:mod:`palaestra.env.separate`).
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import logging
import posixpath
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from palaestra.sandbox.base import Sandbox
from palaestra.tasks import Task
from palaestra.tasks.config import ArtifactConfig, VerifierCollectConfig
from palaestra.tasks.verifier_env import artifact_sources

log = logging.getLogger(__name__)

#: Exits 0 when ``$1`` is a regular file or a directory (not a link to one).
_COPYABLE_SH = '[ -L "$1" ] && exit 3; [ -f "$1" ] || [ -d "$1" ] || exit 2'
MANIFEST = "manifest.json"
HOOKS = "hooks.json"


def collect_hooks(task: Task) -> list[VerifierCollectConfig]:
    """The hooks of one collection: the task's, then its step's."""
    step = task.step_config
    return [*task.config.verifier.collect, *(step.verifier.collect if step else [])]


def collected_artifacts(task: Task, workdir: str) -> list[ArtifactConfig]:
    """The artifacts of one collection: ``/logs/artifacts``, the task's, then its step's."""
    step = task.step_config
    if step is None or not step.artifacts:
        return artifact_sources(task.config, workdir)
    merged = task.config.model_copy(update={"artifacts": [*task.config.artifacts, *step.artifacts]})
    return artifact_sources(merged, workdir)


async def collect_episode(task: Task, sandbox: Sandbox, root: Path | None, episode: str) -> None:
    """:func:`collect` for an episode, into ``root/<episode-id>/`` (a step's collection under
    its ``steps/<name>/``); ``root`` None runs the hooks only. Never raises: what failed is
    logged (a sandbox that died with the agent has nothing to collect)."""
    into = None if root is None else root / episode
    if into is not None and task.step is not None:
        into = into / "steps" / task.step
    try:
        await collect(task, sandbox, into)
    except Exception as e:
        log.warning(
            "collecting episode %s's artifacts failed: %s: %s", episode, type(e).__name__, e
        )


async def collect(task: Task, sandbox: Sandbox, into: Path | None) -> None:
    """Steps 1 and 2 of the module doc; ``into`` None runs the hooks only. Nothing is written
    when there was nothing to collect (no hook, no artifact declared, ``/logs/artifacts``
    empty)."""
    hooks = [await _run_hook(sandbox, hook) for hook in collect_hooks(task)]
    entries = collected_artifacts(task, sandbox.spec.workdir)
    if into is None or (len(entries) == 1 and not hooks and await _empty(sandbox, entries[0])):
        return
    await sandbox.kill_all()  # nothing the agent left running changes what is copied
    manifest = []
    claimed: list[PurePosixPath] = []
    for entry in entries:
        place = host_place(entry)
        record: dict[str, Any] = {
            "source": entry.source,
            "destination": f"artifacts/{place}",
            "service": entry.service,
            "exclude": list(entry.exclude),
        }
        if any(_overlap(place, other) for other in claimed):  # as Harbor: the first one stays
            guess = "file" if PurePosixPath(entry.source).suffix else "directory"
            manifest.append({**record, "type": guess, "status": "skipped"})
            continue
        claimed.append(place)
        target = into / "artifacts" / place
        try:
            copied = await copy_artifact(sandbox, entry, target)
        except Exception as e:  # best effort, as Harbor: recorded, the episode goes on
            log.warning("artifact %s was not collected: %s", entry.source, e)
            copied = False
        is_dir = await asyncio.to_thread(target.is_dir)
        status = "ok" if copied else "failed"
        if copied and is_dir and not await asyncio.to_thread(_has_files, target):
            status = "empty"
        manifest.append({**record, "type": "directory" if is_dir else "file", "status": status})
    await asyncio.to_thread(_write, into, manifest, hooks)


def host_place(entry: ArtifactConfig) -> PurePosixPath:
    """Harbor's host path of an artifact, under ``artifacts/``: its ``destination``, else its
    source without the root (``/var/log/x`` -> ``var/log/x``); ``..`` parts never count."""
    path = PurePosixPath(entry.destination or entry.source)
    parts = [p for p in path.parts if p not in ("", "/", "..")]
    return PurePosixPath(*parts) if parts else PurePosixPath(".")


async def _empty(sandbox: Sandbox, entry: ArtifactConfig) -> bool:
    """Whether the directory ``entry`` names is missing or holds nothing."""
    found = await sandbox.exec(
        ["find", entry.source, "-mindepth", "1", "-print", "-quit"], timeout=60
    )
    return not found.stdout.strip()


def _overlap(a: PurePosixPath, b: PurePosixPath) -> bool:
    return a == b or a in b.parents or b in a.parents or "." in (str(a), str(b))


async def _run_hook(sandbox: Sandbox, hook: VerifierCollectConfig) -> dict[str, Any]:
    record: dict[str, Any] = {"command": hook.command, "service": hook.service}
    try:
        result = await sandbox.exec(
            ["bash", "-c", hook.command], timeout=hook.timeout_sec, user=hook.user
        )
    except Exception as e:  # best effort, as Harbor
        log.warning("collect hook %r failed: %s", hook.command, e)
        return {**record, "error": f"{type(e).__name__}: {e}"}
    if not result.ok:
        log.warning("collect hook %r exited %s", hook.command, result.exit_code)
    tail = result.output[-4000:]
    return {**record, "exit_code": result.exit_code, "timed_out": result.timed_out, "output": tail}


async def copy_artifact(sandbox: Sandbox, entry: ArtifactConfig, target: Path) -> bool:
    """Copy the artifact to the host path ``target`` as data (links leaving it, special files
    and set-id bits dropped), without what its ``exclude`` patterns match; False when there is
    none to copy (missing, or itself a link)."""
    check = await sandbox.exec(["sh", "-c", _COPYABLE_SH, "sh", entry.source], timeout=60)
    if check.exit_code != 0:
        return False
    await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
    await sandbox.download(entry.source, target)
    if entry.exclude and await asyncio.to_thread(target.is_dir):
        await asyncio.to_thread(_exclude, target, entry.exclude)
    return True


def copy_name(entry: ArtifactConfig) -> str:
    """A file name for an artifact's copy in a staging directory."""
    return posixpath.basename(entry.source.rstrip("/")) or "root"


def _exclude(root: Path, patterns: list[str]) -> None:
    """Remove what ``tar --exclude`` would leave out: a path whose name, or any trailing part of
    its relative path, matches a pattern."""
    for path in sorted(root.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        parts = path.relative_to(root).parts
        tails = ["/".join(parts[i:]) for i in range(len(parts))]
        if any(fnmatch.fnmatchcase(tail, p.rstrip("/")) for tail in tails for p in patterns):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)


def _has_files(path: Path) -> bool:
    return any(path.iterdir())


def _write(into: Path, manifest: list[dict[str, Any]], hooks: list[dict[str, Any]]) -> None:
    (into / "artifacts").mkdir(parents=True, exist_ok=True)
    (into / "artifacts" / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    if hooks:
        (into / HOOKS).write_text(json.dumps(hooks, indent=2) + "\n")
