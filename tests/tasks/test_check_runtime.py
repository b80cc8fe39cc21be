"""The hidden tests' runtime (``palaestra_check.py``, ``palaestra_fork.py``, started by
``palaestra_launch.py``), run as a checker runs it: root in a sandbox, its children as nobody,
forked from the fork server. Each child must behave as the interpreter started afresh would, and
leave nothing behind; the server the launcher forks holds nothing of the checker's script."""

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
from tests.tasks.runtime_support import run_with_runtime

#: Runs in the sandbox, as root, from the runtime's directory; prints one JSON object.
SCRIPT = r"""
import os, sys, time
from palaestra_check import kill_nobody_processes, run_command, run_python
import palaestra_fork

SECRET = "palaestra-reference-5e1f7a"  # what a checker's script holds: the server must not
# A child of the server has a copy of the server's memory: it looks for the secret there, given
# it in two halves (the whole is in its memory only if the server held it).
SCAN = '''
a, b = (half.encode() for half in INPUT)
found = False
with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
    for line in maps:
        span, perms = line.split()[:2]
        start, end = (int(x, 16) for x in span.split("-"))
        try:
            mem.seek(start)
            data = mem.read(end - start) if "r" in perms else b""
        except (OSError, ValueError, OverflowError):
            continue
        i = data.find(a)
        while i >= 0 and not found:
            found = data[i + len(a):i + len(a) + len(b)] == b
            i = data.find(a, i + 1)
emit(found)
'''
halves = [SECRET[:12], SECRET[12:]]
server = palaestra_fork._zygote.pid
with open("/proc/%d/cmdline" % server, "rb") as f:
    server_argv = [a.decode() for a in f.read().split(b"\0")]
out = {"server_argv": server_argv}
PROBE = "import os, sys\nemit([sys.path, dict(os.environ), os.getuid(), os.getgid(), os.getgroups()])"
out["forked_server_child"] = run_python(PROBE, None, cwd="/tmp").value
out["secret_in_forked_server"] = run_python(SCAN, halves, cwd="/tmp").value
palaestra_fork.stop_server()  # a server forked from the checker now would hold the script:
palaestra_fork._zygote.start(forked=True)
out["secret_in_late_fork"] = run_python(SCAN, halves, cwd="/tmp").value
palaestra_fork.stop_server()  # the next child starts a new interpreter as the server

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
out["new_server_child"] = run_python(PROBE, None, cwd="/tmp").value
out["forks"] = palaestra_fork.forkable([py, "-B", "x.py"], palaestra_fork.CHILD_ENV) is not None
# any other program: executed from a fork of the server, as nobody, in a session of its own
SHOW_ID = ["sh", "-c", "id -u; cut -d' ' -f6 /proc/$$/stat; echo $$; cat; echo e >&2; exit 3"]
res = run_command(SHOW_ID, cwd="/tmp/app", stdin="hi")
out["exec"] = [res.returncode, res.stdout.split(), res.stderr]
undumpable, palaestra_fork._suid_undumpable = palaestra_fork._suid_undumpable, lambda: False
res = run_command(SHOW_ID, cwd="/tmp/app", stdin="hi")
out["exec_server"] = [res.returncode, res.stdout.split(), res.stderr]
palaestra_fork._suid_undumpable = undumpable  # (fs.suid_dumpable not 0: through the server)
res = run_command(["no-such-program-here"], cwd="/tmp/app")
out["exec_missing"] = [res.ok, res.error]
res = run_command(["sleep", "30"], cwd="/tmp/app", timeout=1)
out["exec_timeout"] = [res.timed_out, res.error]
value = {"s": "\u00e9\u2603\n", "f": [1.5, -0.0, 1e300], "n": None, "l": [1, [2, {}]]}
out["round_trip"] = run_python("emit(INPUT)", value, cwd="/tmp/app").value == value
res = run_python("open(_out, 'w').write('{\"value\": 1} trailing')", None, cwd="/tmp/app")
out["unreadable"] = [res.ok, res.error]
# copies and removals never go through a link
from palaestra_check import copy_tree_for_child
from palaestra_fork import make_private_dir, remove_tree

src = make_private_dir("src-")
os.mkdir(src + "/sub")
with open(src + "/sub/f", "w") as f:
    f.write("data")
os.chmod(src + "/sub/f", 0o640)
os.utime(src + "/sub/f", (1000000000, 1000000000))
os.symlink("/tests/secret", src + "/link")
copy = copy_tree_for_child(src)
st = os.stat(copy + "/sub/f")
out["copy"] = [open(copy + "/sub/f").read(), oct(st.st_mode & 0o777), st.st_mtime, st.st_uid,
               os.readlink(copy + "/link"), oct(os.stat(src).st_mode & 0o777)]
os.mkfifo(src + "/fifo")
try:
    copy_tree_for_child(src)
    out["fifo"] = "copied"
except OSError as e:
    out["fifo"] = str(e)
outside = make_private_dir("outside-")
with open(outside + "/keep", "w") as f:
    f.write("x")
os.symlink(outside, src + "/sub/escape")
remove_tree(src)
out["removed"] = [os.path.exists(src), os.path.exists(outside + "/keep")]
out["heavy"] = sorted(m for m in ("re", "json", "subprocess", "tempfile", "shutil", "ctypes")
                      if m in sys.modules)
from palaestra_fork import json_dumps
print(json_dumps(out))
"""


@pytest.fixture(scope="module")
def results() -> dict:
    async def run() -> dict:
        backend = LocalBackend()
        try:
            async with await backend.create(SandboxSpec()) as sandbox:
                return await run_with_runtime(sandbox, SCRIPT)
        finally:
            await backend.aclose()

    return asyncio.run(run())


def test_the_launcher_forks_a_server_that_holds_nothing_of_the_script(results: dict) -> None:
    """test.sh runs the checker through palaestra_launch, which forks the fork server before
    it reads the script: the server's memory lacks the script's secret (the checker's has it),
    and its children start as those of a server started afresh (after the first was killed)."""
    argv = results["server_argv"]
    assert argv[-3:] == ["palaestra_launch.py", "run.py", ""], argv  # a fork of the launcher
    assert results["secret_in_forked_server"] is False
    assert results["secret_in_late_fork"] is True  # the look finds it where it is
    assert results["forked_server_child"] == results["new_server_child"]
    path, env, uid, gid, groups = results["forked_server_child"]
    assert "/tmp/rt" not in path and env["HOME"] == "/tmp"
    assert (uid, gid, groups) == (65534, 65534, [])


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


def test_other_programs_run_from_the_server_as_nobody(results: dict) -> None:
    code, (uid, session, pid, stdin), stderr = (
        results["exec"][0],
        results["exec"][1],
        results["exec"][2],
    )
    assert (code, uid, stdin, stderr) == (3, "65534", "hi", "e\n"), results["exec"]
    assert session == pid  # it leads a session of its own
    code, (uid, session, pid, stdin), stderr = results["exec_server"]
    assert (code, uid, stdin, stderr, session) == (3, "65534", "hi", "e\n", pid)
    assert results["exec_missing"][0] is False
    assert results["exec_missing"][1].startswith("cannot start no-such-program-here"), results
    assert results["exec_timeout"] == [True, "timeout after 1s"]


def test_json_through_the_server_and_unreadable_output(results: dict) -> None:
    assert results["round_trip"] is True
    assert results["unreadable"] == [False, "unreadable output"]


def test_copies_and_removals_never_follow_links(results: dict) -> None:
    """A copy for a child keeps links as links and files' data, mode and time, is nobody's,
    refuses a FIFO (reading one would block); removing a tree leaves what a link in it points
    to."""
    data, mode, mtime, uid, link, src_mode = results["copy"]
    assert (data, mode, mtime, uid, link) == ("data", "0o640", 1e9, 65534, "/tests/secret")
    assert src_mode == "0o700"  # a private dir: root's alone
    assert "is not a regular file" in results["fifo"]
    assert results["removed"] == [False, True]


def test_the_checker_imports_nothing_heavy(results: dict) -> None:
    """What every verification pays: none of json (its re and enum), subprocess, tempfile,
    shutil or ctypes is imported by a checker that used every common path above."""
    assert results["heavy"] == []


def test_json_codec_matches_json() -> None:
    """The runtime's JSON (json's C code without the json package) reads and writes as
    ``json.dumps`` / ``json.loads`` do, errors included."""
    fork = _runtime_module("palaestra_fork")
    values = [None, True, 0, -(2**70), 1.5, float("inf"), float("nan"), "", "\u00e9\u2603\"\\",
              [1, [2, [3]]], {"a": {"b": [None]}, "z": 1}, (1, 2), {1: "int key"}]  # fmt: skip
    for value in values:
        text = fork.json_dumps(value)
        assert text == json.dumps(value), value
        assert repr(fork.json_loads(text)) == repr(json.loads(text))
    for text in [' {"a": [1, 2.5e3, "x"]} \n', b"[1]", "NaN", "-Infinity", '"\\ud83d"']:
        assert repr(fork.json_loads(text)) == repr(json.loads(text)), text
    for bad in ["", "{", "[1] x", "{'a': 1}", "[1,]", '"\x01"', b"\xff"]:
        with pytest.raises(ValueError):
            json.loads(bad)
        with pytest.raises(ValueError):
            fork.json_loads(bad)
    circular: list = []
    circular.append(circular)
    for bad_value in [object(), {(1, 2): 3}, circular]:
        with pytest.raises((TypeError, ValueError)) as want:
            json.dumps(bad_value)
        with pytest.raises(want.type):
            fork.json_dumps(bad_value)


def _runtime_module(name: str):
    import importlib.util

    path = next(p for p in CHECK_RUNTIME if p.stem == name)
    spec = importlib.util.spec_from_file_location(f"_rt_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))  # its siblings, as in tests/
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


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
