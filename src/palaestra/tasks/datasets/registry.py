"""Harbor dataset registries: ``registry.json`` -> task directories, by sparse git checkout.

A registry is Harbor's JSON list of datasets::

    [{"name": "terminal-bench", "version": "2.0", "description": "...",
      "tasks": [{"name": "hello-world", "git_url": "https://github.com/org/repo.git",
                 "git_commit_id": "3f2a...", "path": "tasks/hello-world"}, ...],
      "metrics": [...]}]

``fetch`` downloads a dataset once: per (repository, commit) one shallow, blob-less, sparse
checkout of exactly the tasks' paths (``git sparse-checkout`` + ``fetch --depth 1``), then copies
each task into ``<cache>/harbor/<name>@<version>/<task name>`` with a ``manifest.json``. After
that the dataset loads from disk with no network, as env id ``harbor/<name>@<version>``::

    palaestra tasks fetch terminal-bench@2.0 --registry ./registry.json
    palaestra eval harbor/terminal-bench@2.0 --policy openai:my-model

A task without ``git_url`` is a local path, relative to the registry file.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import urllib.request
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from palaestra.tasks.errors import TaskError
from palaestra.tasks.generators import cache_dir
from palaestra.tasks.generators.base import write_atomically
from palaestra.tasks.loader import load_task
from palaestra.tasks.source import TaskSet

DEFAULT_REGISTRY = "https://raw.githubusercontent.com/laude-institute/harbor/main/registry.json"


class RegistryError(ValueError):
    pass


class RegistryTask(BaseModel):
    name: str
    git_url: str | None = None
    git_commit_id: str | None = None
    path: str


class DatasetSpec(BaseModel):
    name: str
    version: str
    description: str = ""
    tasks: list[RegistryTask]
    metrics: list[dict] = Field(default_factory=list)

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"


def _datasets_root() -> Path:
    return cache_dir().parent / "harbor"


def read_registry(source: str | Path) -> tuple[list[DatasetSpec], Path | None]:
    """Parse a registry from a path, ``file://`` or ``http(s)://`` URL (blocking: call it off
    the event loop). Returns the datasets and the registry's directory when it is local."""
    text: str
    base: Path | None = None
    src = str(source)
    if src.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(src, timeout=60) as resp:  # noqa: S310 - a user's registry
                text = resp.read().decode()
        except OSError as e:
            raise RegistryError(
                f"cannot download the registry {src}: {e}. Fix: check the URL and the network, "
                "or pass a local registry.json with --registry"
            ) from None
    else:
        path = Path(src.removeprefix("file://")).expanduser()
        if not path.is_file():
            raise RegistryError(f"no registry file at {path}. Fix: pass a registry.json path")
        text, base = path.read_text(), path.parent.resolve()
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise RegistryError(f"{src} line {e.lineno}: not JSON ({e.msg})") from None
    if isinstance(raw, dict) and "datasets" in raw:
        raw = raw["datasets"]
    if not isinstance(raw, list):
        raise RegistryError(f"{src}: a registry is a JSON list of datasets (name, version, tasks)")
    try:
        return [DatasetSpec.model_validate(d) for d in raw], base
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise RegistryError(f"{src}: dataset entry field {where}: {first['msg']}") from None


def find_dataset(datasets: list[DatasetSpec], ref: str) -> DatasetSpec:
    """``name@version``, or ``name`` alone when the registry has one version of it."""
    name, _, version = ref.partition("@")
    matches = [d for d in datasets if d.name == name and (not version or d.version == version)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        known = ", ".join(sorted(d.ref for d in datasets)) or "none"
        raise RegistryError(f"no dataset {ref!r} in the registry; it has: {known}")
    versions = ", ".join(d.version for d in matches)
    raise RegistryError(f"dataset {name!r} has versions {versions}; name one: {name}@<version>")


def dataset_dir(ref: str) -> Path:
    return _datasets_root() / ref


async def _git(*args: str, cwd: Path | None = None) -> str:
    proc = await asyncio.create_subprocess_exec(
        "git",
        *args,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RegistryError(f"git {' '.join(args)} failed: {err.decode().strip()[-1000:]}")
    return out.decode().strip()


async def _checkout(url: str, commit: str | None, paths: list[str]) -> tuple[Path, str]:
    """A sparse, shallow checkout of ``paths`` of ``url`` at ``commit`` (cached)."""
    key = hashlib.sha256(url.encode()).hexdigest()[:16]
    repo = _datasets_root() / ".repos" / key / (commit or "HEAD")
    if (repo / ".palaestra-complete").is_file():
        return repo, (repo / ".palaestra-complete").read_text().strip()
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    await _git("init", "-q", cwd=repo)
    await _git("remote", "add", "origin", url, cwd=repo)
    await _git(
        "sparse-checkout", "set", "--no-cone", *(f"/{p.strip('/')}/" for p in paths), cwd=repo
    )
    await _git(
        "fetch", "-q", "--depth", "1", "--filter=blob:none", "origin", commit or "HEAD", cwd=repo
    )
    await _git("checkout", "-q", "FETCH_HEAD", cwd=repo)
    resolved = await _git("rev-parse", "HEAD", cwd=repo)
    if commit and not resolved.startswith(commit):
        raise RegistryError(f"{url}: asked for commit {commit}, got {resolved}")
    (repo / ".palaestra-complete").write_text(resolved + "\n")
    return repo, resolved


async def fetch(ds: DatasetSpec, registry_dir: Path | None = None) -> Path:
    """Download ``ds`` into the cache (once) and return its directory of task directories."""
    dest = dataset_dir(ds.ref)
    if dest.is_dir():
        return dest
    groups: dict[tuple[str, str | None], list[RegistryTask]] = {}
    for task in ds.tasks:
        if task.git_url is None:
            continue
        groups.setdefault((task.git_url, task.git_commit_id), []).append(task)
    sources: dict[str, tuple[Path, str]] = {}
    for (url, commit), tasks in groups.items():
        repo, resolved = await _checkout(url, commit, [t.path for t in tasks])
        for t in tasks:
            sources[t.name] = (repo / t.path, f"{url}@{resolved}:{t.path}")
    for t in ds.tasks:
        if t.git_url is None:
            if registry_dir is None:
                raise RegistryError(f"task {t.name!r} has no git_url and the registry is remote")
            sources[t.name] = (registry_dir / t.path, str(registry_dir / t.path))

    def write(tmp: Path) -> None:
        tmp.mkdir(parents=True)
        for name, (src, origin) in sources.items():
            if not (src / "task.toml").is_file():
                raise RegistryError(f"{origin}: no task.toml there; is the path right?")
            shutil.copytree(src, tmp / name, symlinks=True)
        manifest = {"dataset": ds.model_dump(), "sources": {n: o for n, (_, o) in sources.items()}}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))

    await asyncio.to_thread(write_atomically, dest, write)
    return dest


def tasks(ref: str) -> TaskSet:
    """A fetched dataset's tasks (from the cache, no network)."""
    dest = dataset_dir(ref)
    if not (dest / "manifest.json").is_file():
        raise RegistryError(
            f"dataset {ref!r} is not fetched. Fix: palaestra tasks fetch {ref} "
            "[--registry PATH_OR_URL]"
        )
    manifest = json.loads((dest / "manifest.json").read_text())
    loaded, failed = [], []
    for n in (t["name"] for t in manifest["dataset"]["tasks"]):
        try:
            loaded.append(load_task(dest / n, task_id=n))
        except TaskError as e:  # skipped, as in a directory of tasks (TaskSet.invalid)
            failed.append((dest / n, e))
    return TaskSet.skipping(loaded, failed, name=f"harbor/{ref}", root=dest)
