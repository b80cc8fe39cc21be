"""Installing a harness from npm, pinned, into a palaestra-owned prefix, and checking that it
is there before any episode runs.

``palaestra harness install NAME`` (and ``scripts/install-harnesses.sh``, which the set-up
runs) calls :func:`install`: ``npm install <package>@<version>`` into a temporary directory
next to :func:`harness_dir` (``$PALAESTRA_HARNESS_DIR`` or ``~/.cache/palaestra/harnesses``,
then ``<name>-<version>``), a check that its executable answers ``--version`` with the pinned
version, and an atomic rename. An install is made once and mounted read-only into every
sandbox; a new version is a new directory.

The CLIs ship native executables (platform packages the npm package depends on), so Node.js
and npm are needed to install them, not to run them: no Node.js is needed in the sandbox.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from palaestra.scaffolds.harness.base import Harness

#: The root of the installs (overridden by ``$PALAESTRA_HARNESS_DIR``).
DEFAULT_ROOT = Path("~/.cache/palaestra/harnesses")


class HarnessNotReady(RuntimeError):
    """A harness cannot start: not installed, a broken install, no npm. The message is one
    line naming the harness and the fix."""


def harness_root() -> Path:
    return Path(os.environ.get("PALAESTRA_HARNESS_DIR") or DEFAULT_ROOT).expanduser()


def harness_dir(harness: Harness) -> Path:
    """Where ``harness`` is (or will be) installed on this machine."""
    return harness_root() / f"{harness.name}-{harness.version}"


def executable(harness: Harness, prefix: Path) -> Path:
    return prefix / "node_modules" / ".bin" / harness.bin


def _install_hint(harness: Harness) -> str:
    return f"run `palaestra harness install {harness.name}`"


def require_installed(harness: Harness, prefix: Path | None = None) -> Path:
    """The install's directory; :class:`HarnessNotReady` when it is missing or holds another
    version. Cheap: no process is started."""
    prefix = prefix or harness_dir(harness)
    exe = executable(harness, prefix)
    if not exe.exists():
        raise HarnessNotReady(
            f"--scaffold {harness.name}: {harness.package}@{harness.version} is not installed "
            f"(no {exe}): {_install_hint(harness)} (needs Node.js and npm on this machine)"
        )
    if not os.access(exe, os.X_OK):
        raise HarnessNotReady(
            f"--scaffold {harness.name}: {exe} is not executable; remove {prefix} and "
            f"{_install_hint(harness)} again"
        )
    return prefix


def interpreter(path: Path) -> str | None:
    """The program interpreter an ELF executable names (``PT_INTERP``: the dynamic loader of
    the C library it was linked against, e.g. glibc's ``/lib64/ld-linux-x86-64.so.2``), or
    None for a static executable, a script, or a file that is not a 64-bit ELF. Reads the
    headers only (blocking; a few kilobytes)."""
    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit ELF only
            return None
        order = "<" if head[5] == 1 else ">"
        (phoff,) = struct.unpack_from(f"{order}Q", head, 0x20)
        phentsize, phnum = struct.unpack_from(f"{order}HH", head, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
        for i in range(phnum):
            kind, _, offset, _, _, size = struct.unpack_from(f"{order}IIQQQQ", table, i * phentsize)
            if kind == 3:  # PT_INTERP
                f.seek(offset)
                return f.read(size).rstrip(b"\0").decode(errors="replace")
    return None


def check_version(harness: Harness, prefix: Path) -> None:
    """Run the installed executable's ``--version``: it must start and name the pinned
    version (:class:`HarnessNotReady` otherwise)."""
    exe = executable(harness, prefix)
    try:
        # its temporary files in a folder that goes with the check (OpenCode makes
        # $TMPDIR/opencode even for --version)
        with tempfile.TemporaryDirectory(prefix="palaestra-version-") as scratch:
            out = subprocess.run(
                [str(exe), "--version"],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
                env={**os.environ, "TMPDIR": scratch},
            )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise HarnessNotReady(
            f"--scaffold {harness.name}: {exe} does not start ({e}); remove {prefix} and "
            f"{_install_hint(harness)} again"
        ) from None
    text = (out.stdout + out.stderr).strip()
    if out.returncode != 0 or harness.version not in text:
        raise HarnessNotReady(
            f"--scaffold {harness.name}: {exe} --version says {text[-200:]!r}, not "
            f"{harness.version}; remove {prefix} and {_install_hint(harness)} again"
        )


def install(harness: Harness, *, force: bool = False) -> Path:
    """Install ``harness`` (blocking; minutes at most): its pinned npm package into
    :func:`harness_dir`. Returns the directory; an existing good install is kept unless
    ``force``."""
    target = harness_dir(harness)
    if target.exists() and not force:
        require_installed(harness, target)
        check_version(harness, target)
        return target
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise HarnessNotReady(
            f"cannot install {harness.name}: npm and Node.js are not installed; install them "
            "(apt-get install nodejs npm, or scripts/install-system-deps.sh) and run again"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        spec = f"{harness.package}@{harness.version}"
        done = subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(tmp),
                "--no-audit",
                "--no-fund",
                "--no-save",
                "--loglevel=error",
                spec,
            ],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            raise HarnessNotReady(
                f"cannot install {harness.name}: npm install {spec} failed: "
                f"{lines[-1] if lines else done.returncode} (is the npm registry reachable?)"
            )
        require_installed(harness, tmp)
        check_version(harness, tmp)
        os.chmod(tmp, 0o755)  # mkdtemp's 0700 would hide it from the sandboxes' users
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
