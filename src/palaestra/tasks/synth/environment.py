"""A project's environment layer: its dependencies and pytest, built once, shared by its tasks.

The layer is a virtual environment made with the task image's interpreter (Debian bookworm's
``/usr/bin/python3``, 3.11, the same on this host and in ``palaestra/base:bookworm``), without
pip, holding the project's dependencies, its test extras and requirements files, and pytest,
but **never the project itself** (no copy of the original source in site-packages, no
``.pyc``: installs run with ``--no-compile``). The project is imported from the workspace
through ``PYTHONPATH`` (``/app``, or ``/app/src``).

Synthesis runs the suite on the host with that venv; tasks run in the image
``palaestra/synth-<project>:<hash>`` (``FROM palaestra/base:bookworm``, the venv at
``/opt/synth/venv``), built once with the ``docker`` command. The image carries the label
:data:`ROOTFS_LABEL`: the local backend runs such a task on the image's exported root
filesystem under a per-sandbox overlay (read-only, shared by every task of the project), the
Docker backend on the image itself; both copy the task's workspace into ``/app``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

from palaestra.tasks.synth.errors import SynthError
from palaestra.tasks.synth.project import Project, normalise, pip

#: The interpreter of the task image (and of synthesis on the host).
PYTHON = Path("/usr/bin/python3")
BASE_IMAGE = "palaestra/base:bookworm"
VENV = "/opt/synth/venv"
IMAGE_PREFIX = "palaestra/synth-"
#: An image with this label runs on its exported root filesystem on the local backend.
ROOTFS_LABEL = "palaestra.local-rootfs"  # palaestra.sandbox.images.LOCAL_ROOTFS_LABEL
_TEST_EXTRAS = re.compile(r"^(test|tests|testing)$")
_REQUIREMENT_FILES = (
    "requirements/test*.txt",
    "requirements-test*.txt",
    "requirements_test*.txt",
    "test-requirements*.txt",
    "test_requirements*.txt",
    "tests/requirements*.txt",
    "requirements/tests*.txt",
)


@dataclass(frozen=True)
class ProjectVenv:
    """The project's virtual environment and what it holds (not an RL :class:`Environment`)."""

    venv: Path
    packages: tuple[str, ...]
    """``name==version`` of everything installed, sorted."""

    @property
    def digest(self) -> str:
        text = "\n".join((PYTHON.resolve().name, *self.packages))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


def image_tag(project: Project, environment: ProjectVenv) -> str:
    return f"{IMAGE_PREFIX}{project.short}:{project.version.lower()}-{environment.digest}"


def _extras(project: Project) -> list[str]:
    info = project.root / "PKG-INFO"
    extras = []
    if info.is_file():
        for line in info.read_text(errors="replace").splitlines():
            if line.startswith("Provides-Extra:"):
                extra = line.split(":", 1)[1].strip()
                if _TEST_EXTRAS.match(extra):
                    extras.append(extra)
    return extras


def _group_requirements(project: Project) -> list[str]:
    """PEP 735 ``[dependency-groups]`` named test/tests/testing (includes followed)."""
    path = project.root / "pyproject.toml"
    if not path.is_file():
        return []
    try:
        groups = tomllib.loads(path.read_text()).get("dependency-groups", {})
    except tomllib.TOMLDecodeError:
        return []

    def expand(name: str, seen: set[str]) -> list[str]:
        found: list[str] = []
        for item in groups.get(name, []):
            if isinstance(item, str):
                found.append(item)
            elif isinstance(item, dict) and item.get("include-group") not in seen:
                found += expand(item["include-group"], seen | {item["include-group"]})
        return found

    return [r for name in groups if _TEST_EXTRAS.match(name) for r in expand(name, {name})]


def _requirement_files(project: Project) -> list[Path]:
    found = {p for pattern in _REQUIREMENT_FILES for p in project.root.glob(pattern)}
    return sorted(found)


def _resolve(project: Project, venv: Path, work: Path) -> list[dict]:
    """What pip would install for the project with its test extras, plus pytest. pip reads a
    copy of the project: preparing its metadata writes into the tree (``*.egg-info``)."""
    extras = _extras(project)
    copy = work / "resolve"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(project.root, copy, symlinks=True)
    target = str(copy) + (f"[{','.join(extras)}]" if extras else "")
    report = work / "pip-report.json"
    args = [target, "pytest", *_group_requirements(project)]
    for path in _requirement_files(project):
        args += ["-r", str(path)]
    done = subprocess.run(
        [
            *pip(),
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--dry-run",
            "--ignore-installed",
            "--disable-pip-version-check",
            "-q",
            "--report",
            str(report),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    shutil.rmtree(copy, ignore_errors=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SynthError(
            f"cannot resolve the dependencies of {project.name} {project.version}: {last}",
            fix="check that its dependencies install on Python 3.11 from PyPI",
        )
    return json.loads(report.read_text())["install"]


def build_venv(project: Project, work: Path, pinned: list[str] | None = None) -> ProjectVenv:
    """The project's venv at ``work/venv`` (built once: a second call reads the first's), with
    ``pinned`` (``name==version``, a manifest's) or what pip resolves for the project now."""
    venv = work / "venv"
    record = work / "environment.json"
    if record.is_file() and venv.is_dir():
        return ProjectVenv(venv, tuple(json.loads(record.read_text())["packages"]))
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([str(PYTHON), "-m", "venv", "--without-pip", str(venv)], check=True)
    own = normalise(project.name)
    wanted = (
        sorted(pinned)
        if pinned is not None
        else sorted(
            f"{item['metadata']['name']}=={item['metadata']['version']}"
            for item in _resolve(project, venv, work)
            if normalise(item["metadata"]["name"]) != own
        )
    )
    done = subprocess.run(
        [
            *pip(),
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--no-deps",
            "--no-compile",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "-q",
            *wanted,
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SynthError(
            f"cannot install the dependencies of {project.name}: {last}",
            fix="pick a project whose dependencies install on Python 3.11",
        )
    _scrub(venv)
    record.write_text(json.dumps({"packages": wanted}, indent=1) + "\n")
    return ProjectVenv(venv, tuple(wanted))


def _scrub(venv: Path) -> None:
    """Drop what names the host: console scripts (their shebangs hold the host's path) and
    pyvenv.cfg's ``command`` line; keep ``bin/python*``."""
    for path in (venv / "bin").iterdir():
        if not path.name.startswith("python"):
            path.unlink()
    cfg = venv / "pyvenv.cfg"
    lines = [line for line in cfg.read_text().splitlines() if not line.startswith("command")]
    cfg.write_text("\n".join(lines) + "\n")
    for cache in venv.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)


def dockerfile(project: Project) -> str:
    pythonpath = "/app/" + project.import_root if project.import_root else "/app"
    return (
        f"FROM {BASE_IMAGE}\n"
        f"COPY venv/ {VENV}/\n"
        f"ENV PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\\n"
        f"    VIRTUAL_ENV={VENV} PYTHONPATH={pythonpath} PYTHONDONTWRITEBYTECODE=1\n"
        "WORKDIR /app\n"
        f'LABEL {ROOTFS_LABEL}="1" palaestra.synth.project="{project.slug}"\n'
    )


def image_exists(tag: str) -> bool:
    done = subprocess.run(["docker", "image", "inspect", tag], capture_output=True, timeout=60)
    return done.returncode == 0


def build_image(project: Project, environment: ProjectVenv, work: Path) -> str:
    """Build the project's task image with the ``docker`` command (once); return its tag."""
    tag = image_tag(project, environment)
    if shutil.which("docker") is None:
        raise SynthError(
            "building the tasks' image needs Docker, and there is no docker command",
            fix="install and start Docker (scripts/provision-docker.sh), or pass --no-image",
        )
    if image_exists(tag):
        return tag
    context = work / "image"
    if context.exists():
        shutil.rmtree(context)
    context.mkdir()
    (context / "Dockerfile").write_text(dockerfile(project))
    shutil.copytree(environment.venv, context / "venv", symlinks=True)
    done = subprocess.run(
        ["docker", "build", "-q", "-t", tag, str(context)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    shutil.rmtree(context, ignore_errors=True)
    if done.returncode != 0:
        raise SynthError(
            f"docker build of {tag} failed: {done.stderr.strip()[-500:]}",
            fix=f"check that Docker runs and has {BASE_IMAGE} (scripts/provision-docker.sh)",
        )
    return tag
