"""The seccomp filter of local sandboxes: Docker's default profile, compiled by libseccomp.

Every process of a local sandbox, its pid 1 included, runs under this filter (bubblewrap loads it
with ``--seccomp`` just before it starts the helper). It has the semantics of Docker's default
profile (moby ``profiles/seccomp/default.json``) for a process holding the capabilities of
:data:`~palaestra.sandbox.local.layout.CAPABILITIES`:

* the calls of ``seccomp_allow.txt`` (the profile's unconditional list) are allowed;
* ``ptrace``, ``process_vm_readv`` and ``process_vm_writev`` are allowed (the profile allows them
  from Linux 4.8 on, where ptrace no longer bypasses seccomp);
* ``clone`` is allowed only without namespace flags (``CLONE_NEWNS``, ``NEWUTS``, ``NEWIPC``,
  ``NEWUSER``, ``NEWPID``, ``NEWNET``, ``NEWCGROUP``); ``clone3``, whose flags a filter cannot
  read, fails with ENOSYS so that C libraries fall back to ``clone``;
* ``socket`` is allowed for every family but ``AF_VSOCK``; ``personality`` only for the five
  personas the profile lists; ``arch_prctl`` and ``modify_ldt`` on x86; ``chroot``, since the
  sandbox holds ``CAP_SYS_CHROOT`` as Docker's containers do;
* everything else fails with EPERM: ``unshare``, ``setns``, ``mount`` and the new mount API,
  ``keyctl``, ``add_key``, ``bpf``, ``perf_event_open``, ``kexec_load``, module loading,
  ``open_by_handle_at``, ``userfaultfd``, ``acct``, ``swapon``, ``reboot``, ``syslog``,
  ``iopl``/``ioperm``, clock setting, ``quotactl``, and ``io_uring_*`` (whose operations run
  unseen by seccomp: a ring's socket op would make the AF_VSOCK socket denied above; Docker's
  profile dropped them in Docker 25)...

The profile's other conditional groups need a capability the sandbox does not have (``SYS_ADMIN``,
``SYS_PTRACE``, ``SYS_MODULE``...), so their calls stay denied. The filter covers the native
architecture and, as Docker's does, its 32-bit companions (x86 and x32 on x86-64, arm on
aarch64), with the same rules. Names libseccomp does not know (calls newer than the installed
library) are skipped: those calls fail with EPERM, as under Docker with the same library.

The program is built once per process (a few milliseconds), as a binary search over the calls
(:func:`_binary_tree`), and handed to each bubblewrap through a pipe (:func:`seccomp_fd`).
"""

from __future__ import annotations

import errno
import functools
import os
from pathlib import Path

#: clone(2) flags that make namespaces: CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER |
#: NEWPID | NEWNET (the mask of Docker's profile, 0x7E020000).
CLONE_NAMESPACE_FLAGS = 0x7E020000
#: personality(2) values the profile allows: PER_LINUX, PER_LINUX32, UNAME26, UNAME26|PER_LINUX32,
#: and 0xffffffff (a query).
PERSONAS = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)
AF_VSOCK = 40
_ALLOW_LIST = Path(__file__).with_name("seccomp_allow.txt")


class SeccompUnavailable(RuntimeError):
    """libseccomp (or its Python binding) is missing: local sandboxes refuse to start."""


def allowed_calls() -> list[str]:
    """The unconditional allow list, as shipped."""
    lines = _ALLOW_LIST.read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


@functools.cache
def seccomp_program() -> bytes:
    """The compiled BPF program (native byte order, as ``seccomp(2)`` takes it). Blocking."""
    try:
        import pyseccomp as sc
    except (ImportError, OSError) as exc:  # OSError: the binding found no libseccomp.so.2
        raise SeccompUnavailable(
            f"local sandboxes need libseccomp for their seccomp filter ({exc}): "
            "apt-get install libseccomp2, then pip install pyseccomp"
        ) from exc
    filt = sc.SyscallFilter(defaction=sc.ERRNO(errno.EPERM))
    for arch in _companion_arches(sc):
        if not filt.exist_arch(arch):
            filt.add_arch(arch)
    allow = [*allowed_calls(), "ptrace", "process_vm_readv", "process_vm_writev", "chroot"]
    if sc.system_arch() in (sc.Arch.X86_64, sc.Arch.X86, sc.Arch.X32):
        allow += ["arch_prctl", "modify_ldt"]
    for name in allow:
        _add(sc, filt, sc.ALLOW, name)
    _add(sc, filt, sc.ALLOW, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_NAMESPACE_FLAGS, 0))
    _add(sc, filt, sc.ERRNO(errno.ENOSYS), "clone3")
    _add(sc, filt, sc.ALLOW, "socket", sc.Arg(0, sc.NE, AF_VSOCK))
    for persona in PERSONAS:
        _add(sc, filt, sc.ALLOW, "personality", sc.Arg(0, sc.EQ, persona))
    _binary_tree(sc, filt)
    read_end, write_end = os.pipe()
    try:
        with os.fdopen(write_end, "wb") as out:
            filt.export_bpf(out)
        with os.fdopen(read_end, "rb") as program:
            read_end = -1
            return program.read()
    finally:
        if read_end != -1:
            os.close(read_end)


def seccomp_fd() -> int:
    """A pipe's read end holding the program, for ``bwrap --seccomp FD`` (which reads it to
    its end). The caller closes it once bubblewrap has inherited it."""
    program = seccomp_program()
    read_end, write_end = os.pipe()
    try:
        # A pipe holds 64 KiB unread; the program is a few KiB (about 8 bytes an instruction).
        if len(program) > 65536:
            raise SeccompUnavailable(f"the seccomp program is {len(program)} bytes, over a pipe's")
        os.write(write_end, program)
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    return read_end


def _binary_tree(sc: object, filt: object) -> None:
    """Ask libseccomp (2.5 and later) for a binary search over the calls rather than a linear
    list. Same rules, a longer program (~1,200 instructions instead of ~970) but a path of a
    few dozen per call: the kernel emulates the filter for every call number when it loads it
    (its action cache), so loading falls from ~1.4 to ~0.5 ms a sandbox start, and each call
    the sandbox makes is checked in fewer steps. Older libraries keep the linear program."""
    try:
        filt.set_attr(sc.Attr.CTL_OPTIMIZE, 2)  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError, OSError, ValueError):
        pass  # libseccomp < 2.5: no such attribute


def _companion_arches(sc: object) -> list[int]:
    """The native architecture's 32-bit companions, as Docker's archMap lists them."""
    arch = sc.Arch  # type: ignore[attr-defined]
    native = sc.system_arch()  # type: ignore[attr-defined]
    if native == arch.X86_64:
        return [arch.X86, arch.X32]
    if native == arch.AARCH64:
        return [arch.ARM]
    return []


def _add(sc: object, filt: object, action: int, name: str, *args: object) -> None:
    """Add a rule for ``name`` on every architecture of the filter. A name libseccomp does not
    know is skipped (the call stays denied); any other failure propagates. Calls that exist only
    on a companion architecture (``socketcall``, the ``*32`` and ``*_time64`` variants) resolve
    to libseccomp's pseudo-numbers here, which it maps per architecture."""
    if sc.resolve_syscall(sc.Arch.NATIVE, name) == -1:  # type: ignore[attr-defined]
        return
    filt.add_rule(action, name, *args)  # type: ignore[attr-defined]
