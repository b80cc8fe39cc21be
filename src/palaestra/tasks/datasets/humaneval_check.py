"""HumanEval's hidden-test runtime, shipped in each task's ``tests/`` (stdlib only).

The verifier (root) never runs agent code in its own process, and agent code never sees the
test logic: the problem's ``check(candidate)`` runs *here*, on the original prompt's helpers,
and ``candidate`` is a proxy that sends the arguments to a server process running
``/app/solution.py`` as ``nobody`` and gets back a value (a Python literal, parsed without
evaluating anything). So agent code can answer calls but cannot report a pass: every ``assert``
is evaluated by the verifier. Each top-level statement of ``check`` that asserts something about
``candidate`` is one test case: it passes, fails (an assertion or a wrong value) or errors (the
agent's function raised or timed out). A file that does not compile is a compile error.

CURE (``/app/test_solution.py`` present): the policy's ``test_*`` functions run, as nobody and
one variant at a time in a random order, against the reference, mutants of it that the
ground-truth tests reject, and the policy's own code; the pass matrix gives the test reward.
"""

import ast
import inspect
import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys

from palaestra_check import (
    NOBODY,
    Checker,
    Tree,
    _limits,
    kill_nobody_processes,
    private_dir,
    run_command,
    run_python,
)

CALL_TIMEOUT = 10.0
_MAX_LINE = 8 * 1024 * 1024


def parse_literal(text):
    """A Python literal (inf and nan included) from ``text``, evaluating nothing."""
    tree = ast.parse(text, mode="eval")
    for node in ast.walk(tree):
        for field, value in ast.iter_fields(node):
            if isinstance(value, ast.Name) and value.id in ("inf", "nan"):
                setattr(node, field, ast.Constant(float(value.id)))
    return ast.literal_eval(tree.body)


_SERVER = (
    inspect.getsource(parse_literal)
    + r"""
import ast, os, sys
proto = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = sys.stderr
path, entry = sys.argv[1], sys.argv[2]

def reply(*message):
    proto.write(repr(message) + "\n")
    proto.flush()

try:
    with open(path, "rb") as f:
        source = f.read()
    code = compile(source, path, "exec", dont_inherit=True)
except SyntaxError as e:
    reply("compile_error", "%s line %s: %s" % (type(e).__name__, e.lineno, e.msg))
    sys.exit(0)
except (OSError, ValueError) as e:
    reply("import_error", str(e)[:300])
    sys.exit(0)
sys.path.insert(0, os.path.dirname(path))
scope = {"__name__": "solution", "__file__": path}
try:
    exec(code, scope)
    fn = scope[entry]
except BaseException as e:
    reply("import_error", ("%s: %s" % (type(e).__name__, e))[:300])
    sys.exit(0)
reply("ready")
for line in sys.stdin:
    args, kwargs = parse_literal(line)
    try:
        value = fn(*args, **kwargs)
    except BaseException as e:
        reply("raised", ("%s: %s" % (type(e).__name__, e))[:300])
        continue
    text = repr(value)
    try:
        parse_literal(text)
    except Exception:
        reply("unreadable", type(value).__name__)
        continue
    proto.write("('value', " + text + ")\n")
    proto.flush()
"""
)


class CandidateError(Exception):
    """The agent's function raised, timed out, or its module could not be loaded."""


class CompileError(CandidateError):
    """The agent's file does not compile."""


class Unreadable:
    """A value that is not a Python literal: equal to nothing."""

    def __init__(self, kind):
        self.kind = kind

    def __eq__(self, other):
        return False

    __hash__ = object.__hash__

    def __repr__(self):
        return f"<unreadable {self.kind}>"


class Candidate:
    """``candidate(*args)`` answered by ``path``'s function ``entry``, run as nobody."""

    def __init__(self, path, entry, timeout=CALL_TIMEOUT):
        self.path, self.entry, self.timeout = path, entry, timeout
        self.proc, self.buffer, self.failure = None, b"", None

    def _start(self):
        self.tree = Tree()  # whatever the agent's server starts: killed with it (stop)
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-B", "-c", _SERVER, self.path, self.entry],
            cwd="/tmp",
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"},
            start_new_session=True,
            preexec_fn=_limits(60),
        )
        self.buffer = b""
        first = self._read()
        if first[0] == "compile_error":
            self.failure = CompileError(first[1])
        elif first[0] != "ready":
            self.failure = CandidateError(first[1] if len(first) > 1 else "no handshake")

    def _read(self):
        deadline = self.timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([fd], [], [], deadline)
            if not ready:
                self.stop()
                raise CandidateError(f"timeout after {self.timeout:g}s")
            chunk = os.read(fd, 65536)
            if not chunk or len(self.buffer) > _MAX_LINE:
                self.stop()
                raise CandidateError("the program exited" if not chunk else "output too large")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            message = parse_literal(line.decode("utf-8", "replace"))
        except Exception:
            return ("unreadable", "an unreadable answer")
        return message if isinstance(message, tuple) and message else ("unreadable", "?")

    def __call__(self, *args, **kwargs):
        if self.failure is None and self.proc is None:
            try:
                self._start()
            except CandidateError as e:
                self.failure = e
        if self.failure is not None:
            raise self.failure
        try:
            self.proc.stdin.write((repr((args, kwargs)) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            self.stop()
            raise CandidateError("the program exited") from None
        answer = self._read()
        if answer[0] == "value":
            return answer[1]
        if answer[0] == "unreadable":
            return Unreadable(answer[1])
        raise CandidateError(str(answer[1]) if len(answer) > 1 else "no answer")

    def stop(self):
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            self.tree.kill()
            self.proc.stdin.close()
            self.proc.stdout.close()
            self.proc = None


def _names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def run_check(prompt, test, entry, path):
    """Run ``check``'s test cases on ``path``: ``(compile_error, [(name, outcome, detail)])``
    with outcome ``passed``, ``failed`` or ``errored``."""
    scope = {"__name__": "reference"}
    exec(compile(prompt + "    raise NotImplementedError\n", "prompt", "exec"), scope)
    exec(compile(test, "test", "exec"), scope)
    body = next(
        n for n in ast.parse(test).body if isinstance(n, ast.FunctionDef) and n.name == "check"
    ).body
    candidate = Candidate(path, entry)
    scope["candidate"] = scope[entry] = candidate  # some checks call the entry point by name
    results, compile_error = [], None
    try:
        for i, stmt in enumerate(body):
            is_case = any(isinstance(n, ast.Assert) for n in ast.walk(stmt)) and (
                "candidate" in _names(stmt)
            )
            name = f"case {i}: {ast.unparse(stmt).splitlines()[0][:120]}"
            try:
                exec(compile(ast.Module([stmt], []), "check", "exec"), scope)
            except CompileError as e:
                compile_error = str(e)
                results.append((name, "errored", str(e)))
                continue
            except CandidateError as e:
                results.append((name, "errored", str(e)))
                continue
            except Exception as e:  # an assertion, or the test choking on a wrong value
                if is_case:
                    results.append((name, "failed", f"{type(e).__name__}: {e}"[:300]))
                continue
            if is_case:
                results.append((name, "passed", ""))
    finally:
        candidate.stop()
    return compile_error, results


def grade(ck, prompt, test, entry, path="/app/solution.py"):
    """Record ``check``'s cases on ``path`` in ``ck``; return the fraction passed."""
    compile_error, results = run_check(prompt, test, entry, path)
    if compile_error is not None:
        ck.compile_errors.append(compile_error)
    for name, outcome, detail in results:
        ck.check(name, outcome == "passed", detail, errored=outcome == "errored")
    return sum(1 for r in results if r[1] == "passed") / len(results) if results else 0.0


_TESTS_CHILD = """
import importlib, sys
out = {}
try:
    mod = importlib.import_module("test_solution")
except BaseException:
    emit({})
    sys.exit(0)
for name in sorted(vars(mod)):
    fn = getattr(mod, name)
    if name.startswith("test") and callable(fn):
        try:
            fn()
            out[name] = 1
        except BaseException:
            out[name] = 0
emit(out)
"""


def _scrub():
    """Kill nobody's processes and remove what it left where it can write: no state carries
    from one variant's run to the next."""
    kill_nobody_processes()
    for root in ("/tmp", "/var/tmp", "/dev/shm"):
        try:
            entries = os.listdir(root)
        except OSError:
            continue
        for name in entries:
            path = os.path.join(root, name)
            try:
                if os.lstat(path).st_uid != NOBODY:
                    continue
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
            except OSError:
                pass


def _policy_tests_on(source, tests):
    """The policy's tests run against ``source`` as ``solution``: {test name: 0 or 1}."""
    work = private_dir("variant-")
    for name, text in (("solution.py", source), ("test_solution.py", tests)):
        with open(os.path.join(work, name), "w") as f:
            f.write(text)
        os.chown(os.path.join(work, name), NOBODY, NOBODY)
    res = run_python(_TESTS_CHILD, None, cwd=work, timeout=30, cpu_seconds=20)
    shutil.rmtree(work, ignore_errors=True)
    _scrub()
    if not res.ok or not isinstance(res.value, dict):
        return {}
    return {str(k): 1 if v == 1 else 0 for k, v in res.value.items()}


def cure(prompt, test, entry, code_ok, mutants_dir="/tests/cure", max_wrong=4):
    """CURE's test reward and counts, or zero tests when the policy wrote none."""
    read = run_command(["cat", "/app/test_solution.py"], cwd="/", timeout=10)
    if not read.ok or not read.stdout.strip():
        return {
            "cure_test_reward": -1.0,
            "cure_tests_total": 0.0,
            "cure_tests_accurate": 0.0,
            "cure_wrong_total": 0.0,
        }
    tests = read.stdout
    with open(os.path.join(mutants_dir, "reference.py")) as f:
        reference = f.read()
    wrong = []
    for name in sorted(os.listdir(mutants_dir)):
        if name.startswith("mutant_") and len(wrong) < max_wrong:
            path = os.path.join(mutants_dir, name)
            mirror = os.path.join(private_dir("mutant-"), "solution.py")
            shutil.copy(path, mirror)
            os.chown(mirror, NOBODY, NOBODY)
            _, results = run_check(prompt, test, entry, mirror)
            _scrub()
            if any(r[1] != "passed" for r in results):  # known wrong: the ground truth rejects it
                with open(path) as f:
                    wrong.append(f.read())
    mine = run_command(["cat", "/app/solution.py"], cwd="/", timeout=10).stdout
    variants = [("correct", reference)] + [("wrong", w) for w in wrong]
    variants.append(("correct" if code_ok else "wrong", mine))
    random.SystemRandom().shuffle(variants)  # no run can tell its place in the order
    rows = [(kind, _policy_tests_on(src, tests)) for kind, src in variants]
    names = sorted({n for _, row in rows for n in row})
    n_wrong = sum(1 for kind, _ in rows if kind == "wrong")
    per_test, accurate = [], 0
    for n in names:
        ok_on_correct = all(row.get(n, 0) for kind, row in rows if kind == "correct")
        passes_wrong = sum(row.get(n, 0) for kind, row in rows if kind == "wrong")
        rejects = n_wrong - passes_wrong
        accurate += ok_on_correct
        score = -passes_wrong + (rejects if ok_on_correct else 0)
        per_test.append(score / n_wrong if n_wrong else 0.0)
        print(
            f"CURE test {n}: passes correct code {bool(ok_on_correct)}, rejects {rejects}/"
            f"{n_wrong} wrong"
        )
    return {
        "cure_test_reward": sum(per_test) / len(per_test) if per_test else -1.0,
        "cure_tests_total": float(len(names)),
        "cure_tests_accurate": float(accurate),
        "cure_wrong_total": float(n_wrong),
    }


def main(problem_json):
    """The hidden test of one problem: grade /app/solution.py, then CURE's matrix."""
    os.chmod("/tests", 0o700)  # the reference and mutants stay out of nobody's reach
    problem = json.loads(problem_json)
    ck = Checker(kind="assert")
    fraction = grade(ck, problem["prompt"], problem["test"], problem["entry_point"])
    code_ok = fraction == 1.0 and not ck.compile_errors
    extra = {"cure_code_reward": fraction}
    extra.update(cure(problem["prompt"], problem["test"], problem["entry_point"], code_ok))
    ck.finish(extra)
