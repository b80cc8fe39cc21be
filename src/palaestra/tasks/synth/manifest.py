"""A project's synthesised tasks as a compact manifest, and the tasks made again from it.

The manifest records what cannot be derived (the project, its version and sdist SHA-256, the
pinned environment, each kept bug's sites and tests, the failure lines its instruction quotes)
and nothing that can: no workspace, no patch. :func:`materialise` makes the tasks again on
first use: the sdist downloaded and checked by hash, the environment and its image built, each
task written from its sites (deterministic edits of the original text). No test runs.

Manifests shipped with palaestra live in ``manifests/<project>.json.gz``; each is the env id
``swe-synth/<project>`` (``palaestra eval swe-synth/more-itertools:0:50``).
"""

from __future__ import annotations

import functools
import gzip
import json
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

from palaestra.tasks.generators import cache_dir
from palaestra.tasks.generators.base import write_atomically
from palaestra.tasks.loader import load_task
from palaestra.tasks.source import TaskSet
from palaestra.tasks.synth import instruction as text
from palaestra.tasks.synth.environment import build_image, build_venv, image_tag
from palaestra.tasks.synth.mutators import Site
from palaestra.tasks.synth.project import Project, fetch
from palaestra.tasks.synth.validate import all_sites
from palaestra.tasks.synth.writer import WRITER_FORMAT, write_task

SHIPPED = Path(__file__).with_name("manifests")
FORMAT = 1


@dataclass
class Bug:
    id: str
    sites: list[str]
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    messages: dict[str, str]
    instruction: str = ""
    """Set only when a writer policy rewrote the template's text."""


@dataclass
class Manifest:
    project: str
    version: str
    source: str
    """``pypi`` or a local directory's path."""
    sdist: str
    sdist_sha256: str
    seed: int
    packages: list[str]
    tasks: list[Bug]
    stats: dict = field(default_factory=dict)
    format: int = FORMAT

    def save(self, path: Path) -> None:
        """As JSON at ``path``, gzipped when its name ends in ``.gz`` (shipped manifests)."""
        text = json.dumps(asdict(self), separators=(",", ":")) + "\n"
        if path.name.endswith(".gz"):
            path.write_bytes(gzip.compress(text.encode(), mtime=0))
        else:
            path.write_text(text)

    @classmethod
    def load(cls, path: Path) -> Manifest:
        raw = path.read_bytes()
        data = json.loads(gzip.decompress(raw) if path.name.endswith(".gz") else raw)
        data["tasks"] = [Bug(**b) for b in data["tasks"]]
        return cls(**data)


def instruction_of(project: Project, bug: Bug, sites: list[Site]) -> str:
    if bug.instruction:
        return bug.instruction
    words = text.forbidden(sorted({s.path for s in sites}), project.import_root)
    return text.render(project.name, project.version, bug.fail_to_pass, bug.messages, words)


def write_bug(project: Project, image: str, bug: Bug, by_key: dict[str, Site], dest: Path) -> Path:
    sites = [by_key[k] for k in bug.sites]
    return write_task(
        project,
        image,
        sites,
        bug.fail_to_pass,
        bug.pass_to_pass,
        instruction_of(project, bug, sites),
        dest,
    )


def shipped() -> list[str]:
    """The projects with a shipped manifest."""
    return sorted(p.name.removesuffix(".json.gz") for p in SHIPPED.glob("*.json.gz"))


@functools.cache
def shipped_manifest(project: str) -> Manifest:
    path = SHIPPED / f"{project}.json.gz"
    if not path.is_file():
        known = ", ".join(shipped()) or "none"
        raise KeyError(f"no synthesised tasks of {project!r}; shipped: {known}")
    return Manifest.load(path)


class Materialised:
    """A manifest's project made ready once (sdist, venv, image), then its tasks on demand."""

    def __init__(self, manifest: Manifest, root: Path | None = None, *, image: bool = True) -> None:
        self.manifest = manifest
        self.image = image
        base = root or cache_dir().parent / "synth"
        self.work = base / f"{manifest.project}-{manifest.version}"
        self._lock = threading.Lock()
        self._ready: tuple[Project, str, dict[str, Site]] | None = None

    def prepare(self) -> tuple[Project, str, dict[str, Site]]:
        with self._lock:
            if self._ready is None:
                m = self.manifest
                self.work.mkdir(parents=True, exist_ok=True)
                source = f"{m.project}=={m.version}" if m.source == "pypi" else m.source
                project = fetch(source, self.work, sdist_sha256=m.sdist_sha256)
                environment = build_venv(project, self.work, pinned=m.packages)
                image = (
                    build_image(project, environment, self.work)
                    if self.image
                    else image_tag(project, environment)
                )
                self._ready = project, image, {s.key: s for s in all_sites(project)}
            return self._ready

    def task_dir(self, task_id: str) -> Path:
        bug = next((b for b in self.manifest.tasks if b.id == task_id), None)
        if bug is None:
            raise KeyError(f"no task {task_id!r} in the synthesised {self.manifest.project}")
        project, image, by_key = self.prepare()
        dest = self.work / "tasks" / f"{image_tag_dir(image)}-w{WRITER_FORMAT}" / task_id
        return write_atomically(dest, lambda tmp: write_bug(project, image, bug, by_key, tmp))

    def tasks(self) -> TaskSet:
        ids = [b.id for b in self.manifest.tasks]
        loader = lambda tid: load_task(self.task_dir(tid), task_id=tid)  # noqa: E731
        return TaskSet.lazy(ids, loader, name=f"swe-synth/{self.manifest.project}")


def image_tag_dir(image: str) -> str:
    return image.rsplit(":", 1)[-1]


_materialised: dict[str, Materialised] = {}


def tasks(project: str) -> TaskSet:
    """``swe-synth/<project>``: the shipped manifest's tasks, made on first use."""
    if project not in _materialised:
        _materialised[project] = Materialised(shipped_manifest(project))
    return _materialised[project].tasks()


__all__ = ["Bug", "Manifest", "Materialised", "image_tag", "shipped", "tasks"]
