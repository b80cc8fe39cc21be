"""Sandbox test fixtures: a ``backend`` per backend name (with run ids starting with
:data:`RUN_PREFIX`, whose cgroups the leak check after every test, in ``tests/conftest.py``,
looks for); the local backend runs once with each helper (``helper``: the C one sandboxes start
by default, and the Python one they fall back to without a C compiler)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from palaestra.sandbox import SandboxBackend, make_backend
from tests.procs import RUN_PREFIX


def new_run_id() -> str:
    return f"{RUN_PREFIX}-{secrets.token_hex(3)}"


#: The sandbox's pid 1, as ``$PALAESTRA_HELPER`` names them: the C one sandboxes start by
#: default, the Python fallback in the full suite only (``slow``: not in the fast tier).
HELPERS = ("c", pytest.param("python", marks=pytest.mark.slow))


@pytest.fixture(params=HELPERS)
def helper(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each helper in turn: sandboxes created meanwhile start it."""
    monkeypatch.setenv("PALAESTRA_HELPER", request.param)
    return str(request.param)


DOCKER = pytest.param("docker", marks=pytest.mark.docker)


@pytest.fixture(params=["local", pytest.param("local-python", marks=pytest.mark.slow), DOCKER])
async def backend(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[SandboxBackend]:
    """A created backend of each kind ("local-python": the local backend with the Python
    helper); "docker" skips (saying how to enable it) without one."""
    async with _created(request.param, monkeypatch) as made:
        yield made


@pytest.fixture(params=["local", DOCKER])
async def backend_once(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[SandboxBackend]:
    """Each backend once, with the helper its sandboxes start by default: for a path (the
    verifier's own code, say) that does not depend on the sandbox's pid 1."""
    async with _created(request.param, monkeypatch) as made:
        yield made


@contextlib.asynccontextmanager
async def _created(name: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[SandboxBackend]:
    if name.startswith("local"):
        monkeypatch.setenv("PALAESTRA_HELPER", "python" if name == "local-python" else "c")
        name = "local"
    if name == "local" and (shutil.which("bwrap") is None or os.geteuid() != 0):
        pytest.skip("the local backend needs bubblewrap, as root: scripts/install-system-deps.sh")
    if name == "docker":
        try:
            from palaestra.sandbox.docker import docker_unavailable
        except ImportError as exc:
            pytest.skip(f"the docker backend is not available in this build: {exc}")
        if reason := await docker_unavailable():
            pytest.skip(f"docker backend unavailable: {reason}")
    try:
        made = make_backend(name)
    except (ValueError, ImportError) as exc:
        pytest.skip(f"sandbox backend {name!r} is unavailable here: {exc}")
    if hasattr(made, "run_id") and hasattr(made, "state_dir"):  # the local backend
        from palaestra.sandbox.local import LocalBackend

        made = LocalBackend(run_id=new_run_id(), state_dir=made.state_dir)
    try:
        yield made
    finally:
        await asyncio.wait_for(made.aclose(), 60)


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


#: Commands the test root filesystem provides (with their libraries and Python's stdlib).
ROOTFS_COMMANDS = (
    "python3",
    "sh",
    "bash",
    "cat",
    "ls",
    "mkdir",
    "tar",
    "env",
    "sleep",
    "true",
    "echo",
    "dirname",
    "basename",
    "chmod",
    "id",
    "rm",
    "touch",
    "head",
    "dd",
    "df",
    "pwd",
)


def build_test_rootfs(dest: Path, commands: tuple[str, ...] = ROOTFS_COMMANDS) -> Path:
    """A small Debian-like root filesystem made of hard links to the host's own files: the
    ``commands``, their libraries and, with ``python3``, Python's stdlib.

    Hard links make it cost no disk and about a second (no debootstrap, works offline in CI).
    /usr is merged (bin, lib... are symlinks into it), as on Debian 12.
    """
    usr = dest / "usr"
    for sub in ("bin", "lib", "lib64", "sbin"):
        (usr / sub).mkdir(parents=True, exist_ok=True)
        (dest / sub).symlink_to(f"usr/{sub}")
    for sub in ("etc", "tmp", "var/tmp", "root", "proc", "dev"):
        (dest / sub).mkdir(parents=True, exist_ok=True)
    (dest / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (dest / "etc/group").write_text("root:x:0:\n")
    (dest / "etc/os-release").write_text("ID=palaestra-test-rootfs\n")

    def in_rootfs(path: str) -> Path:
        if path.startswith(("/bin/", "/lib/", "/lib64/", "/sbin/")):
            return usr / path.lstrip("/")
        return dest / path.lstrip("/")

    def link(host: str) -> None:
        real = os.path.realpath(host)
        target = in_rootfs(real)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(real, target)
        name = in_rootfs(host)
        if name != target and not name.exists():  # keep the name it is known by too
            name.parent.mkdir(parents=True, exist_ok=True)
            name.symlink_to(real)

    libs: set[str] = set()
    python = os.path.realpath("/usr/bin/python3")
    stdlib = f"/usr/lib/{os.path.basename(python)}"
    elfs = [
        next(p for p in (f"/usr/bin/{c}", f"/bin/{c}", shutil.which(c)) if p and os.path.exists(p))
        for c in commands
    ]
    if "python3" in commands:
        elfs += [str(p) for p in Path(stdlib, "lib-dynload").glob("*.so")]
    for path in elfs:
        link(path)
        out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
        libs.update(w for w in out.split() if w.startswith("/"))
    for lib in libs:
        link(lib)
    if "python3" in commands:
        subprocess.run(["cp", "-al", stdlib, str(usr / "lib")], check=True)
    return dest


@pytest.fixture(scope="session")
def test_rootfs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_test_rootfs(tmp_path_factory.mktemp("rootfs"))
