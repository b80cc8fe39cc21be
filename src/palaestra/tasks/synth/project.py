"""A project to synthesise tasks from: its source fetched, unpacked and read for its layout.

``SOURCE`` is a PyPI name (``more-itertools``, ``tabulate==0.9.0``): its sdist is downloaded
with ``pip download --no-binary :all: --no-deps`` (an sdist carries the tests; a wheel does
not), checked by SHA-256 when a manifest names one, and unpacked. Or it is a local git
directory: its tracked files at ``HEAD`` are copied (never ``.git``).

The layout is read from the files alone: test files (``test_*.py``, ``*_test.py``,
``conftest.py``, anything under a ``test``/``tests``/``testing`` directory), the import root
(``src/`` when the packages live there) and the library's modules (every other ``.py`` file under
the import root, less docs, examples, build scripts). A project with C extensions or without
tests is refused with a :class:`SynthError` saying so.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

from palaestra.tasks.synth.errors import SynthError

#: Directories whose Python files are neither library nor tests.
_NOT_LIBRARY = frozenset(
    {
        "docs",
        "doc",
        "examples",
        "example",
        "benchmarks",
        "benchmark",
        "bench",
        "scripts",
        "tools",
        "build",
        "dist",
        "ci",
        ".github",
        "contrib",
        "demo",
        "site-packages",
        "venv",
        ".venv",
        "tasks",
        "_build",
        "extra",
        "misc",
    }
)
_NOT_LIBRARY_FILES = frozenset({"setup.py", "noxfile.py", "fabfile.py", "conftest.py", "tasks.py"})
_TEST_DIRS = frozenset({"test", "tests", "testing", "t"})
_NATIVE = (".c", ".cc", ".cpp", ".pyx", ".pxd", ".rs", ".f90")
_SPEC = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:==([A-Za-z0-9.+!_-]+))?$")


def pip() -> list[str]:
    """The pip that fetches and installs: this interpreter's."""
    return [sys.executable, "-m", "pip"]


@dataclass(frozen=True)
class Project:
    """A project's unpacked source and its layout (paths relative to ``root``)."""

    name: str
    version: str
    root: Path
    import_root: str
    library: tuple[str, ...]
    tests: tuple[str, ...]
    sdist: str = ""
    sdist_sha256: str = ""

    @property
    def slug(self) -> str:
        """``<name>-<version>``, safe as a directory name and a task id prefix."""
        return re.sub(r"[^a-z0-9.]+", "-", f"{self.name}-{self.version}".lower()).strip("-")

    @property
    def short(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")

    def save(self, path: Path) -> None:
        data = {**asdict(self), "root": str(self.root)}
        path.write_text(json.dumps(data, indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> Project:
        data = json.loads(path.read_text())
        data["root"] = Path(data["root"])
        data["library"], data["tests"] = tuple(data["library"]), tuple(data["tests"])
        return cls(**data)


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download_sdist(spec: str, dest: Path) -> Path:
    """``pip download`` the sdist of ``spec`` (``name`` or ``name==version``) into ``dest``."""
    if not _SPEC.match(spec):
        raise SynthError(
            f"{spec!r} is neither a PyPI package name (name or name==version) nor a directory",
            fix="pass a package name such as more-itertools, or a local git directory",
        )
    dest.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            *pip(),
            "download",
            "--no-binary",
            ":all:",
            "--no-deps",
            "--disable-pip-version-check",
            "-q",
            "-d",
            str(dest),
            spec,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    found = sorted(p for p in dest.iterdir() if p.name.endswith((".tar.gz", ".zip", ".tgz")))
    if done.returncode != 0 or not found:
        err = done.stderr.strip().splitlines()
        last = next((line for line in reversed(err) if line.startswith("ERROR")), err[-1:] or [""])
        if "No matching distribution" in done.stderr or "Could not find a version" in done.stderr:
            raise SynthError(
                f"PyPI has no source distribution (sdist) of {spec!r}",
                fix="check the name and version on pypi.org; projects that publish only "
                "wheels cannot be used (a wheel carries no tests)",
            )
        raise SynthError(f"cannot download the sdist of {spec!r}: {last}", fix="check the name")
    return found[-1]


def unpack(archive: Path, dest: Path) -> Path:
    """Unpack an sdist into ``dest``; return the directory holding its files."""
    dest.mkdir(parents=True, exist_ok=True)
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            z.extractall(dest)
    else:
        with tarfile.open(archive) as t:
            t.extractall(dest, filter="data")
    entries = [p for p in dest.iterdir()]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else dest


def copy_git_tree(source: Path, dest: Path) -> str:
    """Copy the files git tracks in ``source`` (at HEAD, not the work tree's changes) into
    ``dest``; return a version for them (``git describe``, else the short commit)."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(source), "archive", "--format=tar", "HEAD"],
            capture_output=True,
            check=True,
            timeout=300,
        )
    except subprocess.CalledProcessError as e:
        raise SynthError(
            f"{source} is not a git work tree with a commit ({e.stderr.decode().strip()})",
            fix="pass a git directory with at least one commit, or a PyPI package name",
        ) from None
    dest.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    described = subprocess.run(
        ["git", "-C", str(source), "describe", "--tags", "--always"],
        capture_output=True,
        text=True,
    )
    return described.stdout.strip() or "0"


def _is_test(rel: Path) -> bool:
    name = rel.name
    return (
        name == "conftest.py"
        or name.startswith("test_")
        or name.endswith("_test.py")
        or any(part in _TEST_DIRS for part in rel.parts[:-1])
    )


def read_layout(name: str, version: str, root: Path, **sdist: str) -> Project:
    """The project's layout, or a :class:`SynthError` for what cannot be used."""
    files = sorted(
        p.relative_to(root)
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )
    native = [str(p) for p in files if p.suffix in _NATIVE and p.parts[0] not in _NOT_LIBRARY]
    setup = root / "setup.py"
    if native or (setup.is_file() and "Extension(" in setup.read_text(errors="replace")):
        shown = ", ".join(native[:3]) or "setup.py's Extension(...)"
        raise SynthError(
            f"{name} {version} has C (or other native) extensions ({shown})",
            fix="pick a pure-Python project: synthesised tasks mutate Python source only",
        )
    python = [p for p in files if p.suffix == ".py"]
    tests = [p for p in python if _is_test(p)]
    if not any(p.name != "conftest.py" for p in tests):
        raise SynthError(
            f"the source of {name} {version} carries no tests (no test_*.py, *_test.py or "
            "tests/ directory)",
            fix="pick a project whose sdist ships its test suite",
        )
    import_root = (
        "src"
        if (root / "src").is_dir() and any(p.parts[0] == "src" and not _is_test(p) for p in python)
        else ""
    )
    library = []
    for p in python:
        if import_root and p.parts[0] != import_root:
            continue
        rel = p.relative_to(import_root) if import_root else p
        if _is_test(p) or rel.parts[0] in _NOT_LIBRARY or str(rel) in _NOT_LIBRARY_FILES:
            continue
        if len(rel.parts) == 1 and rel.name in _NOT_LIBRARY_FILES | {"__init__.py"}:
            continue
        library.append(str(p))
    if not library:
        raise SynthError(f"found no library modules in {name} {version}", fix="pick another")
    return Project(
        name=name,
        version=version,
        root=root,
        import_root=import_root,
        library=tuple(library),
        tests=tuple(str(p) for p in tests),
        **sdist,
    )


def fetch(source: str, work: Path, *, sdist_sha256: str = "") -> Project:
    """Fetch and unpack ``source`` under ``work`` (once: a second call reads what the first
    left), and read its layout."""
    saved = work / "project.json"
    if saved.is_file():
        return Project.load(saved)
    local = Path(source).expanduser()
    tree = work / "source"
    if tree.exists():
        shutil.rmtree(tree)
    if local.is_dir():
        version = copy_git_tree(local, tree)
        name = local.resolve().name
        project = read_layout(name, version, tree)
    else:
        archive = download_sdist(source, work / "sdist")
        digest = sha256(archive)
        if sdist_sha256 and digest != sdist_sha256:
            raise SynthError(
                f"the sdist {archive.name} has SHA-256 {digest}, not the manifest's {sdist_sha256}",
                fix="PyPI served other bytes for this version: re-synthesise the project",
            )
        name, _, version = archive.name.removesuffix(".tar.gz").removesuffix(".zip").rpartition("-")
        unpacked = unpack(archive, work / "unpack")
        shutil.move(unpacked, tree)
        shutil.rmtree(work / "unpack", ignore_errors=True)
        project = read_layout(
            normalise(name), version, tree, sdist=archive.name, sdist_sha256=digest
        )
    project.save(saved)
    return project
