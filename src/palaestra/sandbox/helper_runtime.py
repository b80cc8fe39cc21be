"""The helper's own runtime: a pid 1 that runs in any sandbox, whatever its image holds.

The helper (:mod:`palaestra.sandbox._helper`) must run in images without ``python3``
(distroless, Alpine/musl, JDK-only, a shell-only task on ``debian:bookworm-slim``). So it never
uses the image's Python, nor its C library: both backends mount a *runtime bundle*, built once on
the host from the interpreter running palaestra, read-only at
:data:`~palaestra.sandbox._channel.HELPER_DIR_IN_SANDBOX` and start it through the bundle's own
dynamic loader (:func:`helper_argv`)::

    /.palaestra/ld.so --library-path /.palaestra/so /.palaestra/bin/python3 -I -S -B -c <boot>

The bundle (:func:`helper_runtime`) holds that interpreter binary, the shared libraries it and
the helper's extension modules need (found with ``ldd``: libpython, libc, libffi...), the loader
they name, the standard library modules the helper imports (with their bytecode) under
``lib/pythonX.Y`` where the interpreter looks for them, and the helper package itself, compiled.
Nothing is read from the image but ``/bin/sh`` when it has one (see :mod:`._helper.spawn`) and
``/etc/passwd`` for user names.

Beside it, when the host has a C compiler (``$CC``, ``cc`` or ``gcc``), the bundle holds the same
helper in C (``palaestra/sandbox/_helper_c``: the same protocol, answers and kill semantics),
linked statically, as ``bin/palaestra-helper``. That one is what sandboxes start by default: a
static binary's exec costs about 0.5 ms where the interpreter's start costs 7 to 8 ms, about
half of a local sandbox's cold start. ``$PALAESTRA_HELPER`` chooses: ``c`` (an error when it
could not be built), ``python``, or unset (C when built, else Python, with a warning). The shell
session's bash script is compiled into it from :data:`._helper.shell.SCRIPT`: one definition.

It lives in ``$PALAESTRA_HELPER_DIR`` (default ``/var/cache/palaestra/helper`` for root, where
local sandboxes reach it without a bind of their own; ``~/.cache/palaestra/helper`` otherwise)
under a key made of
both helpers' sources and the interpreter's identity (path, size, modification time, version),
is made atomically (a rename) and reused by every later process. Making it takes about 1.5 s
(mostly the C compile), once.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from palaestra.sandbox._channel import HELPER_BOOT, HELPER_DIR_IN_SANDBOX
from palaestra.sandbox._helper.shell import SCRIPT
from palaestra.sandbox.base import SandboxError

#: Changes whenever the bundle's layout does: part of its key.
_FORMAT = "4"
_HELPER = Path(__file__).with_name("_helper")
_HELPER_C = Path(__file__).with_name("_helper_c")
#: The C helper in the bundle, and why it is missing when it could not be built.
C_HELPER, C_HELPER_FAILED = "bin/palaestra-helper", "bin/palaestra-helper.failed"
#: The host-side launcher that changes ids before bubblewrap (:func:`setids_argv`), its source.
SETIDS, _SETIDS_C = "bin/palaestra-setids", Path(__file__).with_name("setids.c")
_log = logging.getLogger(__name__)
#: The modules the helper may import besides its own (and what Python's start-up imports).
_PROBE = """
import os, sys
sys.path.insert(0, sys.argv[1])
import _helper.server, _helper.spawn, _helper.kill, resource
import encodings.ascii, encodings.latin_1, encodings.utf_8
files = [m.__file__ for m in list(sys.modules.values()) if getattr(m, "__file__", None)]
lib = "%s/python%d.%d" % (sys.platlibdir, *sys.version_info[:2])
print("\\n".join([os.path.dirname(os.__file__), lib, *files]))
"""
#: Compiles ``path shown-as`` pairs with the bundle's interpreter (its bytecode tag and magic).
_COMPILE = """
import py_compile, sys
for path, shown_as in zip(sys.argv[1::2], sys.argv[2::2]):
    py_compile.compile(path, dfile=shown_as, doraise=True)
"""
_LDD_LINE = re.compile(r"^\s*(?:(\S+)\s+=>\s+)?(/\S+)\s+\(0x[0-9a-f]+\)\s*$")
_lock = threading.Lock()


def helper_python() -> list[str]:
    """The bundle's interpreter, started through its own loader, inside a sandbox (the bundle
    mounted at :data:`HELPER_DIR_IN_SANDBOX`)."""
    root = HELPER_DIR_IN_SANDBOX
    return [f"{root}/ld.so", "--library-path", f"{root}/so", f"{root}/bin/python3"]


def helper_argv(config: str | None = None) -> list[str]:
    """The command that starts the helper inside a sandbox (the C one unless
    ``$PALAESTRA_HELPER`` says ``python`` or it could not be built); ``config`` is its optional
    JSON configuration. Blocking the first time (it makes the bundle)."""
    if helper_kind() == "c":
        argv = [f"{HELPER_DIR_IN_SANDBOX}/{C_HELPER}"]
    else:
        argv = [*helper_python(), "-I", "-S", "-B", "-c", HELPER_BOOT]
    return argv if config is None else [*argv, config]


def setids_argv(uid: int, detach: tuple[str, ...] = ()) -> list[str]:
    """The command prefix that runs a program as ``uid`` (user and group, no supplementary
    groups): the bundle's static ``palaestra-setids`` when the C build worked, else util-linux's
    ``setpriv`` (one exec either way; setpriv's start-up costs ~1.5 ms more). With the
    launcher, the program runs in a mount namespace of its own without the mounts at
    ``detach`` (see :mod:`palaestra.sandbox.local.mountns`); setpriv ignores them. Blocking the
    first time (it makes the bundle)."""
    launcher = helper_runtime() / SETIDS
    if launcher.is_file():
        return [str(launcher), *(("--detach", *detach, "--") if detach else ()), str(uid)]
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]


def helper_kind() -> str:
    """``"c"`` or ``"python"``: which helper sandboxes start (see the module's docstring)."""
    wanted = os.environ.get("PALAESTRA_HELPER", "").strip().lower()
    if wanted not in ("", "c", "python"):
        raise SandboxError(
            f"PALAESTRA_HELPER={wanted!r} is not a helper: use c, python or unset it"
        )
    if wanted == "python":
        return "python"
    runtime = helper_runtime()
    if (runtime / C_HELPER).is_file():
        return "c"
    failed = runtime / C_HELPER_FAILED
    reason = failed.read_text().strip() if failed.is_file() else "it was not built"
    if wanted == "c":
        raise SandboxError(
            f"PALAESTRA_HELPER=c, but the C helper could not be built ({reason}); install a C "
            "compiler and static glibc (apt-get install gcc libc6-dev), or unset PALAESTRA_HELPER"
        )
    _warn_python_helper(reason)
    return "python"


@functools.cache
def _warn_python_helper(reason: str) -> None:
    _log.warning(
        "the sandbox helper runs on Python: its C build failed (%s); each sandbox starts about "
        "8 ms slower. Install gcc and libc6-dev to build it.",
        reason,
    )


def helper_runtime() -> Path:
    """The host directory of the runtime bundle, made when missing. Blocking."""
    with _lock:  # creation threads run concurrently
        made = _made()
        if not (made / "ld.so").is_file():  # removed by hand meanwhile
            _made.cache_clear()
            made = _made()
        return made


#: Where root keeps the bundle by default: a path every uid can reach, so that local sandboxes
#: (whose bwrap runs as an unprivileged uid) bind it directly. Under root's home (mode 0700) each
#: sandbox needed a bind of its own made by root first: a mount and an unmount a sandbox.
SYSTEM_RUNTIME_DIR = Path("/var/cache/palaestra/helper")


def runtime_cache_dir() -> Path:
    """``$PALAESTRA_HELPER_DIR``; else :data:`SYSTEM_RUNTIME_DIR` for root, where ``/var/cache``
    exists; else ``~/.cache/palaestra/helper``."""
    configured = os.environ.get("PALAESTRA_HELPER_DIR")
    if configured:
        return Path(configured)
    if os.geteuid() == 0 and SYSTEM_RUNTIME_DIR.parent.parent.is_dir():
        return SYSTEM_RUNTIME_DIR
    return Path.home() / ".cache" / "palaestra" / "helper"


def _interpreter() -> Path:
    """The host's ``/usr/bin/python3`` when there is one (distributions link it statically with
    libpython: it starts faster), else the interpreter running palaestra (a virtual
    environment's base)."""
    system = Path("/usr/bin/python3")
    if system.is_file():
        return Path(os.path.realpath(system))
    return Path(os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable))


@functools.cache
def _made() -> Path:
    python = _interpreter()
    digest = hashlib.sha256(f"{_FORMAT}\0{python}\0".encode())
    st = python.stat()
    digest.update(f"{st.st_size}\0{st.st_mtime_ns}\0".encode())
    sources = [*sorted(_HELPER.glob("*.py")), *sorted(_HELPER_C.glob("*.[ch]")), _SETIDS_C]
    for path in sources:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    target = runtime_cache_dir() / digest.hexdigest()[:16]
    if not (target / "ld.so").is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.parent == SYSTEM_RUNTIME_DIR:  # reachable by every uid, whatever the umask
            for directory in (SYSTEM_RUNTIME_DIR.parent, SYSTEM_RUNTIME_DIR):
                directory.chmod(0o755)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            _build(python, tmp)
            tmp.rename(target)
        except OSError:
            if not (target / "ld.so").is_file():
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # made meanwhile by another process
    return target


def _build(python: Path, dest: Path) -> None:
    """Lay the bundle out in ``dest``: see the module's docstring."""
    for sub in ("bin", "so", "_helper"):
        (dest / sub).mkdir(parents=True)
    shutil.copy2(python, dest / "bin" / "python3")
    stdlib_dir, lib_dir, *modules = _run(
        [str(python), "-I", "-S", "-c", _PROBE, str(_HELPER.parent)]
    ).splitlines()
    stdlib, lib = Path(os.path.realpath(stdlib_dir)), dest / lib_dir
    binaries, sources = [python], []
    for name in modules:
        source = Path(os.path.realpath(name))
        if not source.is_relative_to(stdlib):
            continue  # the helper's own modules, copied below
        copy = lib / source.relative_to(stdlib)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, copy)
        if copy.suffix == ".py":
            sources += [str(copy), f"{HELPER_DIR_IN_SANDBOX}/{copy.relative_to(dest)}"]
        else:
            binaries.append(source)
    (lib / "lib-dynload").mkdir(exist_ok=True)  # where the interpreter looks for its prefix
    if not (lib / "os.py").exists():  # its landmark (os itself may be frozen into it)
        (lib / "os.py").touch()
    loader = None
    for binary in binaries:
        for soname, path in _needed(binary):
            if soname is None:
                loader = path
            elif not (dest / "so" / soname).exists():
                shutil.copy2(path, dest / "so" / soname)
    if loader is None:
        raise SandboxError(f"cannot find the dynamic loader of {python} (ldd names none)")
    shutil.copy2(loader, dest / "ld.so")
    for source in sorted(_HELPER.glob("*.py")):
        copy = dest / "_helper" / source.name
        shutil.copy2(source, copy)
        sources += [str(copy), f"{HELPER_DIR_IN_SANDBOX}/_helper/{source.name}"]
    _run([str(python), "-I", "-S", "-c", _COMPILE, *sources])
    _build_c_helper(dest)
    for path in [dest, *dest.rglob("*")]:  # the sandbox's users (any uid) read it
        path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)


def _build_c_helper(dest: Path) -> None:
    """Compile the C helper, statically linked, into the bundle; when that fails, say why in
    :data:`C_HELPER_FAILED` (sandboxes then start the Python helper)."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        (dest / C_HELPER_FAILED).write_text("no C compiler: neither $CC, cc nor gcc\n")
        return
    (dest / "c").mkdir()
    (dest / "c" / "shell_script.h").write_text(f"#define SHELL_SCRIPT {_c_string(SCRIPT)}\n")
    argv = [
        compiler,
        "-O2",
        "-std=gnu11",
        "-static",
        "-I",
        str(dest / "c"),
        "-o",
        str(dest / C_HELPER),
        *map(str, sorted(_HELPER_C.glob("*.c"))),
    ]
    setids = [compiler, "-O2", "-std=gnu11", "-static", "-o", str(dest / SETIDS), str(_SETIDS_C)]
    try:
        subprocess.run(argv, capture_output=True, text=True, check=True)
        subprocess.run(setids, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = (getattr(exc, "stderr", "") or str(exc)).strip().splitlines()
        (dest / C_HELPER_FAILED).write_text(f"{compiler}: {detail[-1] if detail else exc}\n")
        (dest / C_HELPER).unlink(missing_ok=True)
    finally:
        shutil.rmtree(dest / "c")


def _c_string(text: str) -> str:
    """``text`` as a C string literal (ASCII: the script is)."""
    escapes = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t"}
    if not text.isascii() or any(ch < " " and ch not in "\n\t" for ch in text):
        raise SandboxError("the shell session's script must be printable ASCII")
    return '"' + "".join(escapes.get(ch, ch) for ch in text) + '"'


def _needed(binary: Path) -> list[tuple[str | None, str]]:
    """``(soname, host path)`` of each shared library ``binary`` loads (``ldd``); the loader
    has no soname."""
    found = []
    for line in _run(["ldd", str(binary)]).splitlines():
        match = _LDD_LINE.match(line)
        if match:
            found.append((match[1], os.path.realpath(match[2])))
    return found


def _run(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        raise SandboxError(
            f"cannot build the sandbox helper's runtime ({' '.join(argv[:2])}...: {detail}); "
            "palaestra needs `ldd` (glibc's libc-bin) on this machine"
        ) from exc
