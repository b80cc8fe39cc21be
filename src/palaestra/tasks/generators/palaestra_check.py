"""Hidden-test runtime shipped in every generated task's ``tests/`` (stdlib only, Python 3.8+).

The verifier process (root) never imports the agent's code. It runs it in child processes as the
unprivileged user ``nobody`` (uid 65534) with a timeout, exchanges JSON through files, and does
every comparison itself. So agent code cannot write ``/logs/verifier``, cannot signal the
verifier, and nothing it prints or plants can fake a pass. ``Checker.finish`` writes
``/logs/verifier/reward.json``: ``reward`` is 1.0 only when every check passed (and there was at
least one), ``partial`` is the fraction passed.

It also writes per-test outcomes for the graded reward strategies (``palaestra.verify``):
``tests_total/passed/failed/errored`` (a check fails when the agent's code ran and answered
wrong, errors when it crashed, timed out or ran out of CPU), ``compile_error`` (1 when
:meth:`Checker.compile_python` found a file that does not compile), and per kind of check
``io_total/io_passed`` (a program's output for an input) and ``assert_total/assert_passed``
(a function's value for an argument). Agent code can only make these worse for itself: a crash
it fakes is an error, a pass needs the right value, which the verifier compares.

    from palaestra_check import Checker, run_python
    ck = Checker()
    res = run_python("from solver import f\\nemit(f(INPUT))", [1, 2, 3])
    ck.equal("f on [1, 2, 3]", res.value if res.ok else res.error, 6)
    ck.finish()
"""

import os
import sys
import time

import palaestra_budget

# No json, subprocess, tempfile or shutil (~20 ms of imports, json's re and enum most) on the
# common paths: palaestra_fork has what they gave. Nor signal (enum again): Linux's numbers.
from palaestra_fork import (
    CHILD_ENV,
    IN_CHILD_DIR,
    MAX_PROCS,
    forkable,
    json_dumps,
    json_loads,
    make_private_dir,
    run_forked,
    stop_server,
)
from palaestra_jail import (  # noqa: F401 (the checker's API: families import them from here)
    READ_ONLY_ROOTS,
    Tree,
    close_to_runs,
    copy_tree,
    read_only_dir,
    read_regular_bytes,
    seal,
    writable_by_runs,
)

NOBODY = 65534
_SIGKILL, _SIGXCPU = 9, 24
REWARD = "/logs/verifier/reward.json"
_MAX_OUTPUT = 8 * 1024 * 1024

_CHILD = r"""
import json, sys
_in, _out = sys.argv[1], sys.argv[2]
with open(_in) as f:
    INPUT = json.load(f)
def emit(value):
    text = json.dumps({"value": value})
    with open(_out, "w") as f:
        f.write(text)
sys.path.insert(0, sys.argv[3])
del sys.argv[1:]
"""


class ChildResult:
    """What a child run gave: ``ok`` with ``value`` (whatever it passed to ``emit``), or
    ``error`` (an exception line, ``timeout``, ``no output``...); ``cpu``: the seconds of CPU
    its whole process tree used; ``memory_mb``: the most memory it was seen to hold (its
    largest process's high-water mark; with a memory bar, also its tree's polled sum: see
    ``palaestra_jail``)."""

    cpu = 0.0
    memory_mb = 0.0

    def __init__(self, ok, value=None, error="", stdout="", stderr="", returncode=None,
                 timed_out=False):  # fmt: skip
        self.ok, self.value, self.error = ok, value, error
        self.stdout, self.stderr, self.returncode, self.timed_out = (
            stdout, stderr, returncode, timed_out)  # fmt: skip

    def __repr__(self):
        return f"ChildResult(ok={self.ok!r}, value={self.value!r}, error={self.error!r})"


def _limits(cpu_seconds):
    """A ``preexec_fn`` that makes a new process nobody's, with ``cpu_seconds`` of CPU (for
    checkers that start long-lived children themselves, as HumanEval's does)."""

    def apply():
        if cpu_seconds is not None:
            import resource

            soft = max(1, int(-(-cpu_seconds // 1)))
            resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    return apply


def private_dir(prefix="check-"):
    """A fresh directory the child may write to (owned by nobody)."""
    path = make_private_dir(prefix)
    os.chown(path, NOBODY, NOBODY)
    return path


def copy_tree_for_child(src, prefix="work-"):
    """A copy of ``src`` owned by nobody: run agent code on a copy when it may modify files."""
    dest = os.path.join(private_dir(prefix), os.path.basename(src.rstrip("/")) or "root")
    copy_tree(src, dest)
    for root, dirs, files in os.walk(dest):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), NOBODY, NOBODY)
    os.lchown(dest, NOBODY, NOBODY)
    return dest


def _forked_result(status, out, err, timeout, cpu_seconds, memory_mb=None):
    """run_command's result for a child of the fork server."""
    if status == "memory":
        error = f"memory limit of {memory_mb} MB exceeded"
        return ChildResult(False, stdout=out, stderr=err, error=error)
    if status == "cpu":
        return ChildResult(False, stdout=out, stderr=err,
                           error=f"CPU time limit of {cpu_seconds}s exceeded")  # fmt: skip
    if status == "procs":
        return ChildResult(
            False, stdout=out, stderr=err, error=f"more than {MAX_PROCS} processes at once"
        )
    if status == "timeout":
        return ChildResult(False, error=f"timeout after {timeout:g}s", stdout=out, stderr=err,
                           timed_out=True)  # fmt: skip
    if status == "gone":
        return ChildResult(False, error="its end was lost: the fork server it came from died",
                           stdout=out, stderr=err)  # fmt: skip
    returncode = os.waitstatus_to_exitcode(status)
    if cpu_seconds is not None and returncode in (-_SIGXCPU, -_SIGKILL):
        return ChildResult(False, stdout=out, stderr=err, returncode=returncode,
                           error=f"CPU time limit of {cpu_seconds}s exceeded")  # fmt: skip
    return ChildResult(returncode == 0, stdout=out, stderr=err, returncode=returncode,
                       error="" if returncode == 0 else f"exit status {returncode}: {err[-500:]}")  # fmt: skip


_agent_ran = []  # whether a run that is not a reference's started (expected values come first)
_reference_dirs = set()  # where references ran from: closed to runs before the first agent run


def _reference_guard(reference, code_dir):
    """Expected values are fixed before any agent code runs, from code no run could change: a
    ``reference`` run after an agent run, or from a directory nobody may write, is a bug of
    the checker (it raises: the oracle fails ``palaestra tasks check``). The first agent run
    closes every reference's directory to runs: agent code would answer with its code."""
    if not reference:
        if not _agent_ran:
            close_to_runs(_reference_dirs)
        _agent_ran.append(True)
        return
    if _agent_ran:
        raise RuntimeError("a reference ran after agent code: run every reference first")
    bad = writable_by_runs(code_dir)
    if bad is not None:
        raise RuntimeError(f"a reference ran from {bad}, which runs may write: use read_only_dir")
    code_dir = os.path.abspath(code_dir)
    root = next((r for r in READ_ONLY_ROOTS if code_dir == r or code_dir.startswith(r + "/")), None)
    if root is None:
        raise RuntimeError(f"a reference ran from {code_dir}, not made by read_only_dir")
    _reference_dirs.add(root)


def _granted(reference, timeout, cpu_seconds):
    """A run's bounds within the checker's budget (``palaestra_budget``; references aside)."""
    if reference:
        return timeout, cpu_seconds, None
    return palaestra_budget.grant(timeout, cpu_seconds)


def _spent(reference, res, asked, granted):
    """Count an agent run against the budget; a run stopped at a bound the budget lowered
    says so (not its own bar's error)."""
    if reference:
        return
    over = res.error.startswith("CPU time limit")
    palaestra_budget.spend(granted[1], res.cpu, over)
    why = palaestra_budget.cut(asked[1], granted[1]) if over else None
    if res.timed_out:
        why = palaestra_budget.cut(asked[0], granted[0])
    if why:
        res.error = why


def run_command(
    argv,
    *,
    cwd="/app",
    timeout=20.0,
    stdin="",
    env=None,
    cpu_seconds=None,
    reference=False,
    service=False,
    memory_mb=None,
):
    """Run ``argv`` as nobody in ``cwd``; return ``ChildResult`` with stdout/stderr/returncode.

    ``cpu_seconds`` is a CPU-time bar (whole seconds) over the command's whole process tree
    (``palaestra_jail``), each process's RLIMIT_CPU too: use it, not ``timeout``, for
    performance requirements; CPU time hardly moves when the machine is busy, wall time does.
    ``memory_mb``: a bar on the memory the tree holds (MB; how it is measured, and what that
    misses: ``palaestra_jail``), the tree killed past it.
    Every process the command leaves is killed when it ends.
    ``reference``: the run gives expected values (see ``_reference_guard``): before any agent
    run, from a ``cwd`` no run may write. ``service``: the command starts a server that later
    runs use (a database's ``pg_ctl start``): what it leaves is killed at the checker's end,
    not at the command's.
    Every command is a child of the fork server (nobody, a session of its own): a Python
    program (this interpreter on a script, ``-m`` or ``-c``) is forked from it, anything else
    is executed from such a fork (found on ``env``'s PATH)."""
    _reference_guard(reference, cwd)
    asked = timeout, cpu_seconds
    timeout, cpu_seconds, refused = _granted(reference, timeout, cpu_seconds)
    if refused:
        return ChildResult(False, error=refused)
    environ = dict(CHILD_ENV)
    environ.update(env or {})
    how = forkable(argv, environ) or ("exec", argv[0], list(argv[1:]))
    status, out, err, _, cpu, memory = run_forked(
        how,
        environ,
        cwd=cwd,
        timeout=timeout,
        stdin=stdin,
        cpu_seconds=cpu_seconds,
        service=service,
        memory_mb=memory_mb,
    )
    res = _forked_result(status, _text(out), _text(err), timeout, cpu_seconds, memory_mb)
    res.cpu, res.memory_mb = cpu, memory
    _spent(reference, res, asked, (timeout, cpu_seconds))
    if how[0] == "exec" and res.returncode == 127 and res.stderr.startswith("cannot start "):
        res.error = _last_line(res.stderr)  # it never ran: as Popen's OSError said it
    return res


def run_python(
    code,
    input_value=None,
    *,
    cwd="/app",
    timeout=20.0,
    path=None,
    cpu_seconds=None,
    reference=False,
    memory_mb=None,
):
    """Run Python ``code`` as nobody with ``INPUT`` bound to ``input_value`` (JSON) and
    ``emit(value)`` to return a JSON value; ``path`` (default ``cwd``) is put first on sys.path.

    The child is forked from the fork server (see ``palaestra_fork``), as if started by
    ``python -I -B -c``; ``reference``, ``cpu_seconds`` and ``memory_mb`` as for
    :func:`run_command` (``path`` no run may write)."""
    _reference_guard(reference, path or cwd)
    asked = timeout, cpu_seconds
    timeout, cpu_seconds, refused = _granted(reference, timeout, cpu_seconds)
    if refused:
        return ChildResult(False, error=refused)
    names = [IN_CHILD_DIR + "input.json", IN_CHILD_DIR + "output.json", path or cwd]
    how = ("code", _CHILD + "\n" + code, names)
    status, out, err, (raw,), cpu, memory = run_forked(
        how,
        CHILD_ENV,
        cwd=cwd,
        timeout=timeout,
        stdin="",
        cpu_seconds=cpu_seconds,
        files={"input.json": json_dumps(input_value)},
        read=("output.json",),
        memory_mb=memory_mb,
    )
    out, err = _text(out), _text(err)
    res = _forked_result(status, out, err, timeout, cpu_seconds, memory_mb)
    res.cpu, res.memory_mb = cpu, memory
    stopped = status in ("timeout", "gone", "cpu", "memory", "procs") or res.error.startswith(
        "CPU time"
    )
    _spent(reference, res, asked, (timeout, cpu_seconds))
    if stopped:
        return res
    if res.returncode != 0:
        res.error = _last_line(err) or f"exit status {res.returncode}"
        return res
    if raw is None:
        res.ok, res.error = False, "no output (emit was not called)"
        return res
    try:
        res.value, res.ok = json_loads(raw)["value"], True
    except (ValueError, KeyError, TypeError, RecursionError):  # nested too deep: unreadable
        res.ok, res.error = False, "unreadable output"
    return res


def within(got, want, tol):
    """Whether ``got`` (a number, or a number's text) is within ``tol`` of ``want``: both
    finite. A comparison written ``abs(g - w) > tol`` lets NaN through (every comparison with
    NaN is False): every tolerance of a hidden test goes through here."""
    try:
        g, w = float(got), float(want)
    except (TypeError, ValueError, OverflowError):
        return False
    finite = g - g == 0 and w - w == 0  # NaN and infinities are not (math: an import)
    return finite and abs(g - w) <= tol


def precomputed(name="precomputed.bin"):
    """The value the generator stored with ``palaestra.tasks.generators.base.precomputed``
    (``tests/precomputed.bin``): inputs and expected results made once, at generation time."""
    import marshal
    import zlib

    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), name), "rb") as f:
        return marshal.loads(zlib.decompress(f.read()))


def _last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:500] if lines else ""


def _text(data):
    return (data or b"")[-_MAX_OUTPUT:].decode("utf-8", "replace")


def kill_nobody_processes():
    """Kill every process of uid nobody (what agent code left behind during verification, and
    the fork server, reaped: the next child starts a new one). A process is nobody's by its
    real uid (/proc/<pid>/status), not by the owner /proc shows (which some kernels make root
    for a process that is not dumpable)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/" + pid + "/status", "rb") as f:
                uid = next(line for line in f if line.startswith(b"Uid:")).split()[1]
            if int(uid) == NOBODY:
                os.kill(int(pid), _SIGKILL)
        except (OSError, StopIteration, ValueError, IndexError):
            pass
    stop_server()
    Tree(everything=True).kill()  # and reap what came back to the checker (a subreaper)


_COMPILE = r"""
import sys
bad = []
for path in sys.argv[1:]:
    try:
        with open(path, "rb") as f:
            compile(f.read(), path, "exec", dont_inherit=True)
    except SyntaxError as e:
        bad.append("%s:%s: %s" % (path, e.lineno, e.msg))
    except (OSError, ValueError) as e:
        bad.append("%s: %s" % (path, e))
print("\n".join(bad))
sys.exit(1 if bad else 0)
"""


def linked(path):
    """Whether the absolute ``path``, or a directory on it, is a symlink."""
    parts = path.strip("/").split("/")
    return any(os.path.islink("/" + "/".join(parts[:i])) for i in range(1, len(parts) + 1))


def read_regular(path, limit=1 << 20):
    """The file's text (its first ``limit`` bytes), or None: missing, not a regular file (a
    FIFO never blocks the checker), or reached through a symlink at any step (the agent's links
    never lead the checker elsewhere). How the checker reads a run's declared output."""
    data = read_regular_bytes(path, limit)
    return None if data is None else data.decode("utf-8", "replace")


def python_files(root):
    """Every ``.py`` file under ``root`` (or ``root`` itself), sorted: what to compile."""
    if os.path.isfile(root):
        return [root]
    found = []
    for here, _, files in os.walk(root):
        found += [os.path.join(here, name) for name in files if name.endswith(".py")]
    return sorted(found)


class Checker:
    """Records named checks and writes the reward.

    ``kind`` (``"assert"``, ``"io"`` or None) is the default kind of each check, counted in
    ``assert_*`` / ``io_*``; a check may give its own."""

    def __init__(self, reward_path=REWARD, kind=None):
        self.reward_path = reward_path
        self.kind = kind
        self.results = []  # (name, ok, detail, errored, kind)
        self.compile_errors = []
        self.started = time.monotonic()

    def check(self, name, ok, detail="", errored=False, kind=None):
        """Record a check; ``errored``: it failed because the agent's code did not run."""
        ok = bool(ok)
        errored = bool(errored) and not ok
        self.results.append((name, ok, detail, errored, kind or self.kind))
        print(
            "{} {}{}".format(
                "PASS" if ok else ("ERROR" if errored else "FAIL"),
                name,
                (": " + str(detail)[:300]) if not ok and detail else "",
            )
        )
        return ok

    def error(self, name, detail="", kind=None):
        """Record a check the agent's code could not answer (a crash, a timeout)."""
        return self.check(name, False, detail, errored=True, kind=kind)

    def equal(self, name, got, want, kind=None):
        ok = got == want  # the detail (two reprs: large values cost) only for a failure
        detail = "" if ok else f"expected {_short(want)}, got {_short(got)}"
        return self.check(name, ok, detail, kind=kind)

    def expect(self, name, res, want, kind=None):
        """A child's value against ``want``: an error when the child failed, else equal."""
        if not res.ok:
            return self.error(name, res.error, kind=kind)
        return self.equal(name, res.value, want, kind=kind)

    def close_to(self, name, got, want, rel=1e-6, abs_=1e-9, kind=None):
        try:
            ok = within(got, want, max(abs_, rel * abs(float(want))))
        except (TypeError, ValueError, OverflowError):
            ok = False
        detail = "" if ok else f"expected {_short(want)}, got {_short(got)}"
        return self.check(name, ok, detail, kind=kind)

    def compile_python(self, *paths):
        """Compile the agent's Python files (as nobody: the verifier never reads agent code
        into itself); a file that does not compile sets ``compile_error``. Returns True when
        all compile."""
        files = [f for p in paths for f in python_files(p)]
        if not files:
            return True
        res = run_command([sys.executable, "-I", "-B", "-c", _COMPILE] + files, cwd="/",
                          timeout=60)  # fmt: skip
        if res.returncode == 0:
            return True
        self.compile_errors.append(res.stdout.strip()[-500:] or res.error)
        print("COMPILE ERROR " + self.compile_errors[-1])
        return False

    @property
    def passed(self):
        return sum(1 for r in self.results if r[1])

    def outcomes(self):
        """The per-test outcome counts ``finish`` writes beside the reward."""
        rows = self.results
        counts = {
            "tests_total": len(rows),
            "tests_passed": self.passed,
            "tests_errored": sum(1 for r in rows if r[3]),
            "compile_error": 1 if self.compile_errors else 0,
        }
        counts["tests_failed"] = counts["tests_total"] - counts["tests_passed"] - counts[
            "tests_errored"]  # fmt: skip
        for kind, prefix in (("io", "io"), ("assert", "assert")):
            mine = [r for r in rows if r[4] == kind]
            counts[prefix + "_total"] = len(mine)
            counts[prefix + "_passed"] = sum(1 for r in mine if r[1])
        return {k: float(v) for k, v in counts.items()}

    def finish(self, extra=None):
        """Write the reward (and ``extra`` numeric keys) and exit."""
        kill_nobody_processes()
        total = len(self.results)
        passed = self.passed
        reward = 1.0 if total and passed == total else 0.0
        result = {"reward": reward, "partial": round(passed / total, 4) if total else 0.0,
                  "checks_passed": float(passed), "checks_total": float(total),
                  **self.outcomes(), **(extra or {})}  # fmt: skip
        os.makedirs(os.path.dirname(self.reward_path), exist_ok=True)
        with open(self.reward_path, "w") as f:
            f.write(json_dumps({k: float(v) for k, v in result.items()}))
        print(f"{passed}/{total} checks passed: reward {reward}")
        sys.exit(0)


def _take_the_verifier_dirs():
    """What test.sh's first lines did with five processes, at import, before any child can
    run: /logs/verifier exists, it and /tests are root's (/tests root-only: the children run
    as nobody and must not read the reference), and no reward is left from before."""
    logs = os.path.dirname(REWARD)
    if os.getuid() != 0 or not os.path.isdir("/tests"):
        return
    os.makedirs(logs, exist_ok=True)
    for path, mode in (("/tests", 0o700), (logs, 0o755)):
        os.chown(path, 0, 0)
        os.chmod(path, mode)
    for name in ("reward.txt", "reward.json"):
        try:
            os.unlink(os.path.join(logs, name))
        except FileNotFoundError:
            pass


_take_the_verifier_dirs()


def _short(value, limit=200):
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
