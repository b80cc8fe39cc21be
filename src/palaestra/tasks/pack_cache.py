"""The packs shipped in the package (``tasks/packs/<name>/``), as the task directories that run.

A pack's task whose hidden test is a declarative harness spec (``tests/harness.bin``, see
:mod:`palaestra.tasks.generators.harness_spec`) carries only its spec and data in the source
tree: the harness and checker runtime (``generators/palaestra_*.py``) it runs on has one
source, the generators'. :func:`materialise` copies the pack into the cache
(``$PALAESTRA_CACHE_DIR/packs/<name>/<version>``, default ``~/.cache/palaestra``) and adds
those runtime files, byte for byte, with their hash-checked bytecode, to every such task's
``tests/``, as a generated task gets them. The version is a digest of the pack's files and the
runtime's: a changed task or harness is materialised again, never patched in place. A task's
wrong solutions (``wrong_solutions/<name>/solve.sh``, what ``palaestra tasks check`` runs)
that build on the reference ("the reference plus one bug") find it as ``reference.sh`` beside
them: the copy adds the task's ``solution/solve.sh`` there, so the pack holds it once. So
``palaestra eval starter``, ``palaestra tasks check starter`` and ``palaestra tasks export
starter`` all see self-contained Harbor tasks.
"""

from __future__ import annotations

import hashlib
import marshal
import shutil
import zlib
from pathlib import Path

from palaestra.tasks.generators import cache_dir
from palaestra.tasks.generators.base import CHECK_RUNTIME, write_atomically, write_bytecode
from palaestra.tasks.generators.harness_spec import _RUNTIME_OF, HARNESS_RUNTIME, SPEC

PACKS_DIR = Path(__file__).resolve().parent / "packs"
_SKIP = ("__pycache__", "*.pyc")


def runtime_files(spec: bytes) -> dict[str, bytes]:
    """The runtime files (name -> bytes) a task with this ``harness.bin`` runs on: the
    checker's and the harness's, those of one answer kind (PostgreSQL's, a function check's)
    only for a spec with such an answer, as ``harness_spec.tests`` ships them."""
    value = marshal.loads(zlib.decompress(spec))
    kinds = {value["answer"]["kind"], *(p["answer"]["kind"] for p in value.get("also", ()))}
    return {
        path.name: path.read_bytes()
        for path in (*CHECK_RUNTIME, *HARNESS_RUNTIME)
        if _RUNTIME_OF.get(path.name, value["answer"]["kind"]) in kinds
    }


def version(source: Path) -> str:
    """A short digest of everything a materialised copy of the pack at ``source`` holds: its
    files (paths, permission bits, bytes) and the runtime files added to it."""
    digest = hashlib.sha256()
    for path in sorted(p for p in source.rglob("*") if p.is_file() and not _skipped(p)):
        rel = path.relative_to(source).as_posix()
        digest.update(f"{rel}\0{path.stat().st_mode & 0o777:o}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    for runtime in (*CHECK_RUNTIME, *HARNESS_RUNTIME):
        digest.update(runtime.name.encode() + b"\0" + runtime.read_bytes())
    return digest.hexdigest()[:12]


def materialise(name: str, *, source: Path | None = None, root: Path | None = None) -> Path:
    """The pack ``name``'s directory of tasks in the cache, written on first use (atomically:
    concurrent processes never see a half-written copy). ``source`` defaults to the shipped
    pack, ``root`` to the cache."""
    source = source or PACKS_DIR / name
    if not source.is_dir():
        raise KeyError(f"no pack {name!r} in {PACKS_DIR}")
    dest = (root or cache_dir().parent) / "packs" / name / version(source)
    return write_atomically(dest, lambda tmp: _write(source, tmp))


def _write(source: Path, dest: Path) -> None:
    shutil.copytree(source, dest, symlinks=True, ignore=shutil.ignore_patterns(*_SKIP))
    for spec in sorted(dest.glob(f"*/tests/{SPEC}")):
        tests = spec.parent
        for file_name, content in runtime_files(spec.read_bytes()).items():
            if (tests / file_name).exists():
                raise ValueError(f"{tests / file_name}: the pack ships its own copy of the runtime")
            (tests / file_name).write_bytes(content)
            (tests / file_name).chmod(0o644)
        write_bytecode(tests)
    for wrong in sorted(dest.glob("*/wrong_solutions/*/solve.sh")):
        reference = wrong.parent.parent.parent / "solution" / "solve.sh"
        if "/solution/reference.sh" in wrong.read_text() and reference.is_file():
            shutil.copy2(reference, wrong.parent / "reference.sh")


def _skipped(path: Path) -> bool:
    return "__pycache__" in path.parts or path.suffix == ".pyc"
