"""The hidden tests' runtime (``palaestra_check.py`` + ``palaestra_fork.py``), run as a checker
runs it: root in a sandbox, its children as nobody, forked from the fork server. Each child
must behave as the interpreter started afresh would, and leave nothing behind."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from palaestra.sandbox import SandboxSpec
from palaestra.sandbox.local import LocalBackend
from palaestra.tasks.generators.base import CHECK_RUNTIME, PRECOMPUTED, precomputed

#: Runs in the sandbox, as root, from the runtime's directory; prints one JSON object.
SCRIPT = r"""
import json, os, sys, time
from palaestra_check import kill_nobody_processes, run_command, run_python
import palaestra_fork

os.makedirs("/tmp/app/pkg", exist_ok=True)
with open("/tmp/app/prog.py", "w") as f:
    f.write("import os, sys\nprint(sys.argv[1:], os.environ.get('EXTRA'), sys.stdin.read())\n"
            "print(__name__, os.getuid(), file=sys.stderr)\n")
with open("/tmp/app/pkg/__init__.py", "w") as f:
    f.write("")
with open("/tmp/app/pkg/__main__.py", "w") as f:
    f.write("import sys\nraise SystemExit('usage: ' + sys.argv[0].rsplit('/', 1)[-1])\n")
with open("/tmp/app/bad.py", "w") as f:
    f.write("def f(:\n")
os.chmod("/tmp/app", 0o755)
py = sys.executable
out = {}
res = run_command([py, "-B", "/tmp/app/prog.py", "a", "b"], cwd="/tmp/app", stdin="in",
                  env={"EXTRA": "x"})
out["script"] = [res.ok, res.stdout, res.stderr]
res = run_command([py, "-m", "pkg"], cwd="/tmp/app")
out["module"] = [res.returncode, res.stderr]
res = run_command([py, "/tmp/app/bad.py"], cwd="/tmp/app")
out["syntax"] = [res.returncode, res.stderr.strip().splitlines()[-1]]
res = run_command([py, "/tmp/app/missing.py"], cwd="/tmp/app")
out["missing"] = [res.returncode, "can't open file" in res.stderr]
res = run_python("emit(sum(INPUT))", [1, 2, 3], cwd="/tmp/app")
out["value"] = [res.ok, res.value]
res = run_python("raise KeyError('k')", None, cwd="/tmp/app")
out["raises"] = [res.ok, res.error]
res = run_python("import time\nwhile True: pass", None, cwd="/tmp/app", cpu_seconds=1)
out["cpu"] = res.error
res = run_python("import time\ntime.sleep(30)", None, cwd="/tmp/app", timeout=1)
out["timeout"] = [res.timed_out, res.error]
# a child forks a process that leaves its session and stays (no exec): kill_nobody_processes
# must find it
STAY = '''
import os, time
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setsid()
    os.write(w, b"x")
    time.sleep(60)
    os._exit(0)
os.read(r, 1)
emit(pid)
'''
stayed = run_python(STAY, None, cwd="/tmp/app").value
out["stayed"] = os.path.exists("/proc/%d" % stayed)
kill_nobody_processes()
time.sleep(0.2)
left = []
for pid in os.listdir("/proc"):
    try:
        with open("/proc/%s/status" % pid) as f:
            if any(l.split()[1] == "65534" for l in f if l.startswith("Uid:")):
                left.append(pid)
    except (OSError, IndexError):
        pass
out["left"] = left
res = run_python("emit('after')", None, cwd="/tmp/app")  # a new server
out["after"] = res.value
out["forks"] = palaestra_fork.forkable([py, "-B", "x.py"], palaestra_fork.CHILD_ENV) is not None
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def results() -> dict:
    async def run() -> dict:
        backend = LocalBackend()
        try:
            async with await backend.create(SandboxSpec()) as sandbox:
                for path in CHECK_RUNTIME:
                    await sandbox.upload(path, f"/tmp/rt/{path.name}")
                await sandbox.write_file("/tmp/rt/run.py", SCRIPT)
                res = await sandbox.exec(["python3", "-E", "-s", "-S", "-B", "run.py"],
                                         cwd="/tmp/rt", timeout=120)  # fmt: skip
                assert res.ok, res.output
                return json.loads(res.stdout.strip().splitlines()[-1])
        finally:
            await backend.aclose()

    return asyncio.run(run())


def test_a_script_runs_as_a_new_interpreter_would(results: dict) -> None:
    ok, stdout, stderr = results["script"]
    assert ok and stdout == "['a', 'b'] x in\n", results["script"]
    assert stderr == "__main__ 65534\n"  # as nobody


def test_modules_errors_and_exit_statuses(results: dict) -> None:
    assert results["module"] == [1, "usage: __main__.py\n"]  # argv[0] is the module's file
    assert results["syntax"][0] == 1 and results["syntax"][1].startswith("SyntaxError")
    assert results["missing"] == [2, True]
    assert results["value"] == [True, 6]
    assert results["raises"] == [False, "KeyError: 'k'"]
    assert results["cpu"] == "CPU time limit of 1s exceeded"
    assert results["timeout"] == [True, "timeout after 1s"]
    assert results["forks"]


def test_nothing_of_nobody_outlives_kill_nobody_processes(results: dict) -> None:
    """A child's own child that left its session and never exec'd (it would keep the fork
    server's undumpable state, hiding it from a scan by /proc owner) is killed, and a new
    server serves after."""
    assert results["stayed"]  # it outlived its run (a session of its own)
    assert results["left"] == []
    assert results["after"] == "after"


def test_precomputed_values_round_trip_through_the_tests_directory(tmp_path: Path) -> None:
    """What a generator stores with ``base.precomputed`` is what the checker's
    ``precomputed()`` reads from the runtime's directory, under the oldest Python the runtime
    supports as well as this one; equal values give equal bytes (the cache stays
    reproducible)."""

    value = {"cases": [("big", "a,b\n" * 1000, 1, b"\x00raw"), ("small", "", None, 2.5)],
             "flags": [True, False, None], "nested": {"k": [1, -2**70]}}  # fmt: skip
    blob = precomputed(value)
    assert blob == precomputed(dict(value)) and len(blob) < 1000  # compressed
    for path in CHECK_RUNTIME:
        (tmp_path / path.name).write_text(path.read_text())
    (tmp_path / PRECOMPUTED).write_bytes(blob)
    read = "from palaestra_check import precomputed; print(repr(precomputed()))"
    pythons = [sys.executable] + [p for p in ("/usr/bin/python3",) if os.access(p, os.X_OK)]
    for python in pythons:
        out = subprocess.run([python, "-E", "-s", "-S", "-B", "-c", read], cwd=tmp_path,
                             capture_output=True, text=True, check=True)  # fmt: skip
        assert out.stdout.strip() == repr(value), python
