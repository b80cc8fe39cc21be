"""The hidden tests' runtime (``palaestra_check.py``, ``palaestra_fork.py``, started by
``palaestra_launch.py``), run as a checker runs it: root in a sandbox, its children as nobody,
forked from the fork server. Each child must behave as the interpreter started afresh would, and
leave nothing behind; the server the launcher forks holds nothing of the checker's script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from palaestra.tasks.generators.base import CHECK_RUNTIME, PRECOMPUTED, precomputed
from tests.tasks.runtime_support import run_in_a_local_sandbox

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
# fork bombs, through the server and through exec (the shell's ends at once, its tree does
# not): each is bounded by its RLIMIT_NPROC, frozen and killed when its run ends
def nobody_left():
    left = []
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/status" % pid) as f:
                if any(l.split()[1] == "65534" for l in f if l.startswith("Uid:")):
                    left.append(int(pid))
        except (OSError, IndexError):
            pass
    return [p for p in left if p != palaestra_fork._zygote.pid]
BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
res = run_python(BOMB, None, cwd="/tmp/app", timeout=60)
out["bomb"] = [res.ok, res.error, nobody_left()]
res = run_command(["sh", "-c", "b() { b | b & }; b; sleep 1"], cwd="/tmp/app", timeout=60)
out["bomb_exec"] = [res.ok, nobody_left()]
res = run_python("import resource\nemit(resource.getrlimit(resource.RLIMIT_NPROC))", None,
                 cwd="/tmp/app")
out["nproc"] = res.value
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
# ... and one the run's end could not reach (a stopped server is not the jail's): the checker's
# end kills it
from palaestra_jail import Tree
STAY_OUTSIDE = STAY.replace("emit(pid)", "emit(pid)\nos.kill(os.getppid(), 9)")
palaestra_fork.Tree, real_tree = (lambda keep: type("NoJail", (), {
    "kill": lambda self: None, "reaped_us": 0, "peak": 0, "cpu": lambda self: 0.0,
    "note_maxrss": lambda self, kb: None})()), palaestra_fork.Tree
stayed = run_python(STAY_OUTSIDE, None, cwd="/tmp/app")
palaestra_fork.Tree = real_tree
out["stayed_outside"] = [p for p in os.listdir("/proc") if p.isdigit() and
                         os.path.exists("/proc/%s/status" % p) and
                         "Uid:\t65534" in open("/proc/%s/status" % p).read()] != []
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
# the jail: CPU over the whole tree, whatever it forks (RLIMIT_CPU restarts at each fork)
BURN = '''
import os, sys, time
def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
'''
RELAY = BURN + '''
for i in range(int(sys.argv[1])):  # each process burns 0.6 s, forks, waits, exits as its child
    burn(0.6)
    pid = os.fork()
    if pid:
        os._exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
print("relay done")
'''
ORPHANS = BURN + '''
r, w = os.pipe()
for i in range(int(sys.argv[1])):  # orphans do the work: nobody waits for them
    if os.fork() == 0:
        if os.fork() == 0:
            burn(0.6)
            os.write(w, b"x")
        os._exit(0)
for i in range(int(sys.argv[1])):
    os.read(r, 1)
print("orphans done")
'''
with open("/tmp/app/relay.py", "w") as f:
    f.write(RELAY)
with open("/tmp/app/orphans.py", "w") as f:
    f.write(ORPHANS)
jail = {}
for name, argv in (("relay", [py, "relay.py", "4"]), ("orphans", [py, "orphans.py", "4"]),
                   ("relay_exec", ["sh", "-c", "%s relay.py 4; exit $?" % py]),
                   ("small", [py, "relay.py", "1"])):
    res = run_command(argv, cwd="/tmp/app", timeout=60, cpu_seconds=1)
    jail[name] = [res.ok, res.error, round(res.cpu, 1), res.stdout]
res = run_python(RELAY.replace("int(sys.argv[1])", "3") + "\nemit(1)", None, cwd="/tmp/app",
                 cpu_seconds=1)
jail["relay_python"] = [res.ok, res.error, round(res.cpu, 1), res.stdout]
res = run_python("import os, tempfile\nemit([os.environ['HOME'], tempfile.gettempdir(), "
                 "os.stat(os.environ['HOME']).st_uid, os.stat(os.environ['HOME']).st_mode & 0o777])",
                 None, cwd="/tmp/app")
jail["home"] = res.value + [os.path.exists(res.value[0])]
out["jail"] = jail
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
import _socket  # not socket: the checker's "heavy" modules are counted below
sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
sock.bind(src + "/sock")
os.symlink("/nonexistent", src + "/dangling")
special = copy_tree_for_child(src)  # never opens the FIFO or the socket: skipped
out["fifo"] = sorted(os.listdir(special)) + [os.readlink(special + "/dangling")]
sock.close()
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
    return run_in_a_local_sandbox(SCRIPT)


@pytest.mark.slow
def test_the_launcher_forks_a_server_that_holds_nothing_of_the_script(results: dict) -> None:
    """test.sh runs the checker through palaestra_launch, which forks the fork server before
    it reads the script: the server's memory lacks the script's secret (the checker's has it),
    and its children start as those of a server started afresh (after the first was killed)."""
    argv = results["server_argv"]
    assert argv[-3:] == ["palaestra_launch.py", "run.py", ""], argv  # a fork of the launcher
    assert results["secret_in_forked_server"] is False
    assert results["secret_in_late_fork"] is True  # the look finds it where it is
    forked, new = results["forked_server_child"], results["new_server_child"]
    for env in (forked[1], new[1]):  # each run's own directory (see the jail's test below)
        assert env.pop("HOME").startswith("/tmp/child-") and env.pop("TMPDIR")
    assert forked == new
    path, env, uid, gid, groups = forked
    assert "/tmp/rt" not in path
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
    skips a FIFO and a socket (opening one would block or fail) and keeps a dangling link as
    it is; removing a tree leaves what a link in it points to."""
    data, mode, mtime, uid, link, src_mode = results["copy"]
    assert (data, mode, mtime, uid, link) == ("data", "0o640", 1e9, 65534, "/tests/secret")
    assert src_mode == "0o700"  # a private dir: root's alone
    assert results["fifo"] == ["dangling", "link", "sub", "/nonexistent"]
    assert results["removed"] == [False, True]


def test_the_checker_imports_nothing_heavy(results: dict) -> None:
    """What every verification pays: none of json (its re and enum), subprocess, tempfile,
    shutil or ctypes is imported by a checker that used every common path above."""
    assert results["heavy"] == []


def test_json_codec_matches_json() -> None:
    """The runtime's JSON (json's C code without the json package) reads and writes as
    ``json.dumps`` / ``json.loads`` do, errors included."""
    fork = _runtime_module("palaestra_fork")
    values = [
        None,
        True,
        0,
        -(2**70),
        1.5,
        float("inf"),
        float("nan"),
        "",
        '\u00e9\u2603"\\',
        [1, [2, [3]]],
        {"a": {"b": [None]}, "z": 1},
        (1, 2),
        {1: "int key"},
    ]
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
    server's undumpable state, hiding it from a scan by /proc owner) is killed when its run
    ends; one the run's jail missed is killed by kill_nobody_processes, and a new server serves
    after."""
    assert results["stayed"] is False  # the run's tree was killed at its end
    assert results["stayed_outside"]  # (without the jail it outlives its run)
    assert results["left"] == []
    assert results["after"] == "after"


def test_a_fork_bomb_is_bounded_and_killed_with_its_run(results: dict) -> None:
    """A fork bomb (every process forks while it can), forked from the server or a shell's
    from exec, fails its run and leaves no process of nobody's when its run ends: its
    ``RLIMIT_NPROC`` bounds it, the watch sees it past ``MAX_PROCS``, its tree is frozen and
    killed. A run's ``RLIMIT_NPROC`` is finite: nobody's processes and ``2 * MAX_PROCS``."""
    ok, error, left = results["bomb"]
    assert not ok and error == "more than 256 processes at once", results["bomb"]
    assert left == []
    assert results["bomb_exec"][1] == [], results["bomb_exec"]
    soft, hard = results["nproc"]
    assert soft == hard and 512 < soft < 512 + 64, results["nproc"]


def test_precomputed_values_round_trip_through_the_tests_directory(tmp_path: Path) -> None:
    """What a generator stores with ``base.precomputed`` is what the checker's
    ``precomputed()`` reads from the runtime's directory, under the oldest Python the runtime
    supports as well as this one; equal values give equal bytes (the cache stays
    reproducible)."""

    value = {
        "cases": [("big", "a,b\n" * 1000, 1, b"\x00raw"), ("small", "", None, 2.5)],
        "flags": [True, False, None],
        "nested": {"k": [1, -(2**70)]},
    }
    blob = precomputed(value)
    assert blob == precomputed(dict(value)) and len(blob) < 1000  # compressed
    for path in CHECK_RUNTIME:
        (tmp_path / path.name).write_text(path.read_text())
    (tmp_path / PRECOMPUTED).write_bytes(blob)
    read = "from palaestra_check import precomputed; print(repr(precomputed()))"
    pythons = [sys.executable] + [p for p in ("/usr/bin/python3",) if os.access(p, os.X_OK)]
    for python in pythons:
        out = subprocess.run(
            [python, "-E", "-s", "-S", "-B", "-c", read],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        )
        assert out.stdout.strip() == repr(value), python


def test_cpu_is_counted_over_the_whole_process_tree(results: dict) -> None:
    """A program that forks before each process reaches its RLIMIT_CPU (the parent waits and
    exits with its child's status), or hands the work to orphans, runs past a 1 s bar as a tree
    and fails it, through the server, through exec and from run_python; one process under the
    bar passes, its CPU counted."""
    jail = results["jail"]
    for name in ("relay", "orphans", "relay_exec", "relay_python"):
        ok, error, cpu, stdout = jail[name]
        assert not ok and error == "CPU time limit of 1s exceeded", (name, jail[name])
        assert "done" not in stdout, (name, jail[name])
    ok, error, cpu, stdout = jail["small"]
    assert ok and stdout == "relay done\n" and 0.5 <= cpu <= 1.0, jail["small"]


def test_each_run_has_a_fresh_directory_of_its_own(results: dict) -> None:
    """HOME and TMPDIR are a directory made for the run, nobody's alone, removed after it."""
    home, tmp, uid, mode, exists_after = results["jail"]["home"]
    assert home == tmp and home.startswith("/tmp/child-") and (uid, mode) == (65534, 0o700)
    assert not exists_after
