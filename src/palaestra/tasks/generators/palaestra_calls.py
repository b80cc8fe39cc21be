"""A Python function judged by a check written in Python (stdlib only, Python 3.9+; shipped in
``tests/`` beside ``palaestra_harness.py`` when a task's answer is ``hs.function_check``).

The answer is the function ``entry`` of the agent's file; the check is task data, a function
``check(candidate)`` (HumanEval's) whose top-level statements that assert something about
``candidate`` are the cases. The two never share a process:

1. **Recorded calls.** At generation time the check runs against the reference, through the
   same code as below (:func:`record`): every ``candidate(...)`` call's arguments are kept, in
   the typed encoding (:func:`encode`), with ``random`` seeded.
2. **The candidate in the jail.** The harness calls the agent's function on those arguments in
   one child (``run_python``: as nobody, a fresh copy of ``/app``, CPU over its process tree,
   the tree killed at its end); the child emits each call's value in the typed encoding, or
   what it raised. Nothing else of the run is read.
3. **The check in the harness.** The harness runs ``check`` itself, ``random`` seeded alike,
   with a ``candidate`` that answers each call from the child's values, decoded into plain
   data (lists, tuples, sets, dicts, floats...: never an object of the agent's). Every assert
   is decided here. A call the record lacks (the check's flow followed the candidate's values
   elsewhere) is asked of a further child, up to ``rounds`` children.

So a case passes iff the problem's own assertions hold on the agent's values, as when
``check`` called it directly, and agent code can neither see the check nor report a pass.
"""

import ast
import random

#: The typed encoding: JSON data that keeps what JSON loses (tuples, sets, dict keys that are
#: not strings, bytes, large ints); floats, inf and nan included, stay floats. One text, run
#: in the harness (below) and in the child that calls the agent's function.
CODEC = r'''
class Unreadable:
    """A value that is not plain data (an object of the agent's): equal to nothing, unequal
    to nothing, neither true nor false (an assert on it fails, whichever way it is put)."""

    def __init__(self, kind):
        self.kind = kind

    def __eq__(self, other):
        return False

    __ne__ = __eq__

    def __bool__(self):
        raise TypeError("an object of type %s is not a value the check can read" % self.kind)

    __hash__ = object.__hash__

    def __repr__(self):
        return "<unreadable %s>" % self.kind


_TAGS = {tuple: "tuple", set: "set", frozenset: "frozenset"}


def encode(value, depth=0):
    """``value`` as JSON data, its types kept; an object that is not plain data is
    ``{"other": its type's name}`` (decoded as :class:`Unreadable`)."""
    if depth > 200:
        raise ValueError("nested too deep")
    if value is None or value is True or value is False:
        return value
    if isinstance(value, int):
        value = int.__index__(value)
        return value if -(1 << 62) < value < (1 << 62) else {"int": format(value, "x")}
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    if type(value) is list:
        return [encode(v, depth + 1) for v in value]
    tag = _TAGS.get(type(value))
    if tag == "tuple":
        return {tag: [encode(v, depth + 1) for v in value]}
    if tag is not None:  # a set: its items in an order every interpreter agrees on
        return {tag: sorted((encode(v, depth + 1) for v in value), key=repr)}
    if type(value) is dict:
        return {"dict": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if type(value) is bytes:
        return {"bytes": value.hex()}
    if type(value) is complex:
        return {"complex": [value.real, value.imag]}
    return {"other": type(value).__name__}


def decode(data):
    """The value :func:`encode` made ``data`` of (plain data only)."""
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    ((tag, inner),) = data.items()
    if tag == "tuple":
        return tuple(decode(v) for v in inner)
    if tag == "set":
        return set(decode(v) for v in inner)
    if tag == "frozenset":
        return frozenset(decode(v) for v in inner)
    if tag == "dict":
        return {decode(k): decode(v) for k, v in inner}
    if tag == "bytes":
        return bytes.fromhex(inner)
    if tag == "complex":
        return complex(inner[0], inner[1])
    if tag == "int":
        return int(inner, 16)
    return Unreadable(str(inner))
'''

#: The child that calls the agent's function (``INPUT``: its file, the function's name and
#: the calls' encoded arguments): it emits ``{"answers": [["value", encoded] | ["raised",
#: text], ...]}``, or ``{"compile_error": text}`` / ``{"load_error": text}``.
CALLER = r"""
import os
path, entry = INPUT["file"], INPUT["entry"]
try:
    with open(path, "rb") as f:
        source = f.read()
    code = compile(source, path, "exec", dont_inherit=True)
except SyntaxError as e:
    emit({"compile_error": "%s line %s: %s" % (type(e).__name__, e.lineno, e.msg)})
    raise SystemExit(0)
except (OSError, ValueError) as e:
    emit({"load_error": str(e)[:300]})
    raise SystemExit(0)
sys.path.insert(0, os.path.dirname(path))
scope = {"__name__": "solution", "__file__": path}
try:
    exec(code, scope)
    fn = scope[entry]
except BaseException as e:
    emit({"load_error": ("%s: %s" % (type(e).__name__, e))[:300]})
    raise SystemExit(0)
answers = []
for call in INPUT["calls"]:
    args, kwargs = decode(call)
    try:
        value = fn(*args, **kwargs)
        answers.append(["value", encode(value)])
    except BaseException as e:
        answers.append(["raised", ("%s: %s" % (type(e).__name__, e))[:300]])
emit({"answers": answers})
"""

_codec: dict = {}
exec(compile(CODEC, "palaestra_calls.CODEC", "exec"), _codec)  # the harness's codec: the child's
encode, decode, Unreadable = _codec["encode"], _codec["decode"], _codec["Unreadable"]


def key(args, kwargs):
    """A call's arguments as a text that equal arguments share (its record's key)."""
    return repr(encode([list(args), dict(kwargs)]))


class CandidateError(Exception):  # noqa: N818 (the check sees an exception it may catch)
    """The agent's function raised, timed out or could not be loaded."""


class Missing(BaseException):  # noqa: N818 (no except Exception in a check swallows it)
    """A call no child was asked: the statement is asked again after another round."""


class Replay:
    """``candidate`` in the harness: each call answered from ``answers`` (key -> ``["value",
    encoded]`` or ``["raised", text]``), a fresh decoded value each time."""

    def __init__(self, answers):
        self.answers, self.missing = answers, []

    def __call__(self, *args, **kwargs):
        k = key(args, kwargs)
        answer = self.answers.get(k)
        if answer is None:
            self.missing.append((k, encode([list(args), dict(kwargs)])))
            raise Missing(k)
        if answer[0] == "value":
            return decode(answer[1])
        raise CandidateError(answer[1])


class Recorder(Replay):
    """``candidate`` at generation time: the reference answers, through the encoding, and
    every call's arguments are recorded in order."""

    def __init__(self, fn):
        super().__init__({})
        self.fn, self.calls = fn, []

    def __call__(self, *args, **kwargs):
        k = key(args, kwargs)
        if k not in self.answers:
            call = encode([list(args), dict(kwargs)])
            self.calls.append(call)
            a, kw = decode(call)
            try:
                self.answers[k] = ["value", encode(self.fn(*a, **kw))]
            except Exception as e:
                self.answers[k] = ["raised", f"{type(e).__name__}: {e}"[:300]]
        return super().__call__(*args, **kwargs)


def _names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def statements(check):
    """The top-level statements of ``check``'s body: ``(label, code, is_case)``; a case is a
    statement that asserts something about ``candidate``."""
    tree = ast.parse(check)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check")
    out = []
    for i, stmt in enumerate(fn.body):
        case = any(isinstance(n, ast.Assert) for n in ast.walk(stmt)) and "candidate" in _names(
            stmt
        )
        label = f"case {i}: {ast.unparse(stmt).splitlines()[0][:120]}"
        out.append((label, compile(ast.Module([stmt], []), "check", "exec"), case))
    return out


def run_statements(answer, candidate):
    """Run ``check`` (``answer["check"]``) with ``candidate``, in a scope of the ``setup``'s
    names, ``random`` seeded: ``[(label, "passed" | "failed" | "errored" | "missing", detail)]``
    for its cases and for the statements the candidate's errors stopped."""
    scope = {"__name__": "check"}
    exec(compile(answer["setup"], "setup", "exec"), scope)
    exec(compile(answer["check"], "check", "exec"), scope)
    scope["candidate"] = scope[answer["entry"]] = candidate  # some checks call it by name
    random.seed(answer.get("seed", 0))
    results = []
    for label, code, case in statements(answer["check"]):
        try:
            exec(code, scope)
        except Missing:
            results.append((label, "missing", "a call no child answered"))
        except CandidateError as e:
            results.append((label, "errored", str(e)))
        except Exception as e:  # an assertion, or the check choking on a wrong value
            if case:
                results.append((label, "failed", f"{type(e).__name__}: {e}"[:300]))
        else:
            if case:
                results.append((label, "passed", ""))
    return results


def record(answer, fn):
    """The encoded arguments of every call ``check`` makes of the reference ``fn``, in order
    (what :func:`judge` asks the agent's function first)."""
    recorder = Recorder(fn)
    results = run_statements(answer, recorder)
    bad = [r for r in results if r[1] != "passed"]
    if bad:
        raise RuntimeError(f"the reference fails its own check: {bad[0]}")
    return recorder.calls


def judge(answer, call):
    """``(compile_error or None, [(label, outcome, detail)])``: ``call(encoded calls)`` runs
    the agent's function on them in the jail and returns ``(answers, compile_error)``,
    answers a list aligned with the calls."""
    answers, pending, compile_error = {}, list(answer["calls"]), None
    for _ in range(answer.get("rounds", 3)):
        if pending:
            got, failure = call(pending)
            compile_error = compile_error or (failure if got is None else None)
            for i, encoded in enumerate(pending):
                args, kwargs = decode(encoded)
                if got is not None and i < len(got):
                    answers[key(args, kwargs)] = got[i]
                else:
                    answers[key(args, kwargs)] = ["raised", failure or "no answer"]
        replay = Replay(answers)
        results = run_statements(answer, replay)
        pending = list({k: call for k, call in replay.missing}.values())
        if not pending:
            break
    return compile_error, [
        (label, "errored" if outcome == "missing" else outcome, detail)
        for label, outcome, detail in results
    ]


def _answers(res):
    """``(answers, failure)`` of the caller child's result; ``failure`` also says a compile
    error (``answers`` None)."""
    if not res.ok:
        return [], res.error or "the function did not answer"
    value = res.value if isinstance(res.value, dict) else {}
    if "compile_error" in value:
        return None, str(value["compile_error"])
    answers = value.get("answers")
    if not isinstance(answers, list):
        return [], str(value.get("load_error") or "the function did not answer")
    return [_answer(a) for a in answers], ""


def _answer(a):
    """One call's answer as the child gave it, or a raised one when it is not one."""
    if isinstance(a, list) and len(a) == 2 and a[0] in ("value", "raised"):
        return a
    return ["raised", "an unreadable answer"]


def caller(src, answer, limits):
    """``call`` for :func:`judge`: the function of ``answer["file"]`` in a fresh copy of
    ``src`` (``/app``, or a mutant's directory) as nobody, one child a round."""
    import os

    from palaestra_check import close_to_runs, copy_tree_for_child, run_python

    rel = os.path.relpath(answer["file"], "/app")

    def call(pending):
        work = copy_tree_for_child(src, prefix="app-")
        res = run_python(
            CODEC + CALLER,
            {"file": os.path.join(work, rel), "entry": answer["entry"], "calls": pending},
            cwd=work,
            timeout=limits.get("timeout", 60),
            cpu_seconds=limits.get("cpu"),
            memory_mb=limits.get("memory_mb"),
        )
        close_to_runs([work])  # nothing this round left is seen by the next
        return _answers(res)

    return call


def grade(src, answer, limits):
    """:func:`judge` on the function of ``answer["file"]`` in ``src``."""
    return judge(answer, caller(src, answer, limits))


def run_check(ck, spec, cases):
    """The harness's runner of a ``check`` answer: each case of the check a check of ``ck``,
    errored when the function did not answer (a compile error recorded once)."""
    compile_error, results = grade("/app", spec["answer"], spec.get("limits", {}))
    if compile_error is not None:
        ck.compile_errors.append(compile_error)
    for label, outcome, detail in results:
        ck.check(label, outcome == "passed", detail, errored=outcome == "errored")


def record_main():
    """Generation time, in a child interpreter of the generator's: read ``{"answer":
    ..., "reference": source}`` (JSON) on stdin, print the recorded calls (JSON)."""
    import json
    import sys

    given = json.load(sys.stdin)
    answer = given["answer"]
    scope = {"__name__": "reference"}
    exec(compile(given["reference"], "reference", "exec"), scope)
    sys.stdout.write(json.dumps(record(answer, scope[answer["entry"]])))
