"""The sandbox probe: what a process in a sandbox may do to the kernel, one line per check.

``probe.c`` and ``syscalls.c`` (beside this file) are compiled once with the host's C compiler, statically linked, so
it runs in any sandbox whatever its image holds (no Python, no C library needed there): see its
header for what each check does and why none of them harms the host. :func:`run_probe` uploads it
into a sandbox and runs it; :func:`weaker_lines` says where one sandbox lets its processes do more
than another (the local backend against Docker's default profile); :func:`markdown_table` prints
both side by side for docs/sandbox.md (``benchmarks/probe_table.py``).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from palaestra.sandbox import Sandbox

HERE = Path(__file__).parent
#: Where the probe lands in a sandbox (every backend's sandboxes have a writable /tmp).
IN_SANDBOX = "/tmp/.palaestra-probe"
#: Files an agent would write first, named in the table when they are writable.
NOTABLE = ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sys/vm/")
_lock = threading.Lock()


@dataclass(frozen=True)
class Line:
    """One check: its name, what it found (text for people) and what it exposes (the things a
    process in the sandbox can do; empty when it can do nothing of the kind)."""

    check: str
    result: str
    exposed: frozenset[str]


@functools.cache
def probe_binary() -> Path:
    """The probe, compiled and statically linked with the host's ``cc`` (once per source, in
    the temp dir). Blocking."""
    sources = sorted(HERE.glob("*.[ch]"))
    digest = hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in sources))
    target = Path(tempfile.gettempdir()) / "palaestra-probe" / digest.hexdigest()[:16]
    with _lock:
        if target.is_file():
            return target
        compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        if compiler is None:
            raise RuntimeError(
                "the sandbox probe needs a C compiler: apt-get install gcc libc6-dev"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        argv = [compiler, "-O2", "-std=gnu11", "-static", "-o", str(tmp)]
        argv += [str(p) for p in sources if p.suffix == ".c"]
        built = subprocess.run(argv, capture_output=True, text=True)
        if built.returncode != 0:
            detail = (built.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(
                f"cannot build the sandbox probe ({detail}); install gcc and libc6-dev"
            )
        tmp.chmod(0o755)
        tmp.rename(target)
        return target


async def upload_probe(sandbox: Sandbox) -> str:
    """Put the probe in ``sandbox`` (runnable by any user); its path there."""
    await sandbox.upload(await asyncio.to_thread(probe_binary), IN_SANDBOX)
    return IN_SANDBOX


async def run_probe(
    sandbox: Sandbox, *, user: str | None = None, only: str = ""
) -> dict[str, Line]:
    """Run the probe in ``sandbox`` (as ``user``; only the checks whose name starts with
    ``only``): its lines by check."""
    path = await upload_probe(sandbox)
    res = await sandbox.exec([path, only] if only else [path], timeout=120, user=user)
    if res.exit_code != 0 or res.truncated:
        raise AssertionError(f"the probe failed in sandbox {sandbox.id}: {res}")
    lines = {}
    for raw in res.stdout.splitlines():
        item = json.loads(raw)
        lines[item["check"]] = Line(item["check"], item["result"], frozenset(item["exposed"]))
    return lines


def weaker_lines(sandbox: dict[str, Line], reference: dict[str, Line]) -> list[str]:
    """Where ``sandbox`` exposes something ``reference`` does not, one sentence per check (a
    check missing from either side is reported too: the probe must have run the same)."""
    return [f"{check}: {why}" for check, why in _weaker(sandbox, reference).items()]


def _weaker(sandbox: dict[str, Line], reference: dict[str, Line]) -> dict[str, str]:
    found = {}
    for check in sorted(set(sandbox) | set(reference)):
        if check not in sandbox or check not in reference:
            found[check] = "missing on one side (the probe ran differently)"
            continue
        beyond = sandbox[check].exposed - reference[check].exposed
        if beyond:
            found[check] = (
                f"{sandbox[check].result} where the reference has {reference[check].result} "
                f"(beyond it: {_summary(beyond)})"
            )
    return found


def _summary(items: frozenset[str], count: int = 3) -> str:
    notable = sorted(i for i in items if i.startswith(NOTABLE))
    rest = sorted(items - set(notable))
    shown = (notable + rest)[:count]
    more = f", +{len(items) - len(shown)} more" if len(items) > len(shown) else ""
    return ", ".join(shown) + more


def cell(line: Line | None) -> str:
    """A line's result for the table, naming the first notable things it exposes."""
    if line is None:
        return "(not run)"
    if len(line.exposed) > 1 and line.check.startswith("write "):
        return f"{line.result}: {_summary(line.exposed, 2)}"
    return line.result


def markdown_table(reference: dict[str, Line], sandbox: dict[str, Line]) -> str:
    """``| check | Docker | local |``, in the probe's order; a line where the local sandbox
    exposes more than Docker is marked **weaker**."""
    rows = ["| check | Docker (default profile) | local | local weaker |", "|---|---|---|---|"]
    weaker = _weaker(sandbox, reference)
    for check in dict.fromkeys([*reference, *sandbox]):
        mark = "**weaker**" if check in weaker else ""
        row = [check, cell(reference.get(check)), cell(sandbox.get(check)), mark]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    return "\n".join(rows)
