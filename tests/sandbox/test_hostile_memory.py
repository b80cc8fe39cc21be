"""A run's memory bar (``memory_mb``) is over its whole process tree, on every backend: a
program that spreads its memory over forks each under the bar, or holds it for less than a
poll, fails; one under the bar passes with its memory measured (``palaestra_jail``).

The checker's runtime runs as test.sh runs it (root in the sandbox, its runs as nobody); the
bar is 64 MB and every process touches what it allocates (a page never written is not held).
"""

from __future__ import annotations

import pytest

from palaestra.sandbox import SandboxBackend, SandboxSpec
from tests.tasks.runtime_support import run_with_runtime

pytestmark = pytest.mark.slow  # a sandbox per backend and a dozen runs in it

SCRIPT = r"""
import os, sys
from palaestra_check import run_command, run_python
from palaestra_fork import json_dumps

HOLD = '''
import os, sys, time
def hold(mb, seconds):
    block = b"x" * (mb << 20)  # written: every page resident
    time.sleep(seconds)
    return len(block)
'''
# four processes at once, 40 MB each (each under the bar, 160 MB as a tree)
SPREAD = HOLD + '''
kids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        hold(40, 5)  # long enough for a poll on a loaded machine: killed at once
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
print("spread done")
'''
# one process over the bar for a moment, far shorter than a poll
BURST = HOLD + '''
hold(120, 0)
print("burst done")
'''
# the same burst in an orphan nobody waits for (its rusage reaches the checker when reaped)
ORPHAN = HOLD + '''
r, w = os.pipe()
if os.fork() == 0:
    if os.fork() == 0:
        hold(120, 0)
        os.write(w, b"x")
    os._exit(0)
os.read(r, 1)
print("orphan done")
'''
WITHIN = HOLD + '''
hold(20, 0.3)
print("within done")
'''
os.makedirs("/tmp/app", exist_ok=True)
for name, text in (("spread", SPREAD), ("burst", BURST), ("orphan", ORPHAN), ("within", WITHIN)):
    with open("/tmp/app/%s.py" % name, "w") as f:
        f.write(text)
os.chmod("/tmp/app", 0o755)
py = sys.executable
out = {}
for name in ("spread", "burst", "orphan", "within"):
    res = run_command([py, name + ".py"], cwd="/tmp/app", timeout=60, memory_mb=64)
    out[name] = [res.ok, res.error, res.memory_mb, res.stdout]
res = run_command(["sh", "-c", "%s spread.py; exit $?" % py], cwd="/tmp/app", timeout=60,
                  memory_mb=64)
out["spread_exec"] = [res.ok, res.error, res.memory_mb, res.stdout]
res = run_python(SPREAD + "\nemit(1)", None, cwd="/tmp/app", timeout=60, memory_mb=64)
out["spread_python"] = [res.ok, res.error, res.memory_mb, res.value]
import palaestra_jail
palaestra_jail.MEMORY_TICK = 3600  # no poll while they run: only the high-water mark is left
for name in ("burst", "orphan"):
    res = run_command([py, name + ".py"], cwd="/tmp/app", timeout=60, memory_mb=64)
    out[name + "_unpolled"] = [res.ok, res.error, res.memory_mb, res.stdout]
res = run_command([py, "spread.py"], cwd="/tmp/app", timeout=60)
out["no_bar"] = [res.ok, res.error, res.memory_mb, res.stdout]
print(json_dumps(out))
"""


@pytest.fixture
async def results(backend_once: SandboxBackend) -> dict:
    async with await backend_once.create(SandboxSpec(memory_mb=1024)) as sandbox:
        return await run_with_runtime(sandbox, SCRIPT)


async def test_memory_spread_over_forks_is_counted_as_a_tree(results: dict) -> None:
    """Four processes of 40 MB each are 160 MB over a 64 MB bar: the tree is killed, through
    the fork server, through exec and from run_python, before any of them finishes."""
    for name in ("spread", "spread_exec", "spread_python"):
        ok, error, memory, shown = results[name]
        assert not ok and error == "memory limit of 64 MB exceeded", (name, results[name])
        assert shown in ("", None) and memory > 64, (name, results[name])


async def test_a_burst_shorter_than_a_poll_is_caught(results: dict) -> None:
    """120 MB held for an instant, by the run's process or by an orphan, fails: a poll may
    catch it while it fills, and with no poll at all its high-water mark (``ru_maxrss``, the
    orphan's when the checker reaps it) is over the bar once the run ends."""
    for name in ("burst", "orphan"):
        ok, error, memory, _ = results[name]
        assert not ok and error == "memory limit of 64 MB exceeded", (name, results[name])
        assert memory > 64, (name, results[name])
        ok, error, memory, stdout = results[name + "_unpolled"]
        assert not ok and error == "memory limit of 64 MB exceeded", (name, results[name])
        assert memory >= 120 and stdout == f"{name} done\n", (name, results[name])


async def test_a_run_under_the_bar_passes_with_its_memory_measured(results: dict) -> None:
    """20 MB under a 64 MB bar passes, measured at its size (the interpreter's own pages on
    top); without a bar the spread program runs to its end."""
    ok, error, memory, stdout = results["within"]
    assert ok and stdout == "within done\n" and 20 <= memory <= 64, results["within"]
    ok, error, _, stdout = results["no_bar"]
    assert ok and stdout == "spread done\n", results["no_bar"]
