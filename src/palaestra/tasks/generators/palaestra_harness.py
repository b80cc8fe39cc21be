"""One declarative hidden test (stdlib only, Python 3.8+; shipped in ``tests/`` beside
``palaestra_check.py``, ``palaestra_cases.py`` and ``palaestra_compare.py`` by the tasks
that use it): ``test.sh`` runs this module, which reads
``tests/harness.bin`` (a spec the generator wrote with ``generators.harness_spec``) and does
what every such hidden test did by hand:

1. **Expected values first.** Cases carry their expected value (made when the task was
   generated). A large input travels as a seed: it is made again here from ``tests/``'s input
   module and checked against its SHA-256; should this Python make other data, the reference
   (``tests/``, copied root's and read-only) runs on it *now*, before any agent code runs.
2. **The answer runs in a jail**: a program (built first when it must be, as nobody, in a
   private copy of ``/app``), a Python call, a Python function judged by a check written in
   Python (``palaestra_calls``: HumanEval's), an SQLite query or a PostgreSQL query; or
   nothing runs (``state``: a shell task's files, looked at without following links). A program
   runs once a case, as nobody, in a fresh case directory made just before it that holds only
   that case's inputs (root's files, sticky directory: it may add files, never change or remove
   them); what it writes under the declared output directory is read without following links
   (regular files only, size-capped). Queries run as SQL only (see ``palaestra_pg``).
3. **One comparison a task** (``output``, ``lines``, ``json_keys``, ``csv``, ``rows``,
   ``equal``), with its tolerance, and the reward through ``Checker``.

The spec (a dict) keys: ``answer`` (how the agent's work runs), ``cases`` (``label``,
``files`` / ``stdin`` / ``make``, ``cpu``, ``want``), ``compare`` (``how`` and options),
``limits`` (``timeout``, ``cpu``, ``memory_mb``), ``kind`` (the checks' outcome kind) and
``reference`` (how expected values are remade); ``also``: further parts (``answer``,
``cases``, ``compare``, ``limits``: the package's functions called, then its command line
run), each run after the one before, every part's expected values fixed first; ``finish``:
``{"module", "fn"}``, a function of a module in ``tests/`` called with the checker and the spec
after every check, whose numbers are written beside the reward (CURE's); ``reward``:
``"partial"`` for a partial-credit task (the reward is the fraction of checks passed, not 1
only when every check passed). ``docs/tasks.md`` documents them.
"""

import os
import random
import sys

from palaestra_cases import age, case_dir, look, read_outputs, read_tree, readonly_tree, stamps
from palaestra_check import (
    NOBODY,
    Checker,
    close_to_runs,
    copy_tree_for_child,
    make_private_dir,
    precomputed,
    read_only_dir,
    run_command,
    run_python,
)
from palaestra_compare import COMPARE, lines, made_stale

SPEC = "harness.bin"
_TESTS = os.path.dirname(os.path.abspath(__file__))


# --- inputs and expected values: all made before the agent's code runs ---------------------


def _module(name):
    """A module the task ships in ``tests/`` (root's: written by the generator)."""
    sys.path.insert(0, _TESTS)
    try:
        return __import__(name)
    finally:
        sys.path.remove(_TESTS)


def _made(make):
    """A large input, made again from its seed by the task's input module."""
    fn = getattr(_module(make["module"]), make["fn"])
    return fn(random.Random(make["seed"]), *make.get("args", ()))


def materialise(spec):
    """The cases with their inputs, and every expected value fixed: a made-again input whose
    digest differs gets the reference's output on it, made here, first (a function of a
    module in ``tests/``, or a program run as nobody from a read-only copy of root's)."""
    cases, stale = [], []
    for case in spec["cases"]:
        case = dict(case)
        make = case.get("make")
        if make is not None:
            made = _made(make)
            key = "stdin" if isinstance(made, str) else "files"
            case[key] = made
            if made_stale(made, make):
                stale.append(case)
        cases.append(case)
    if stale:
        print("NOTE this Python made other data from a seed: the reference runs on it")
        ref = spec["reference"]
        root = readonly_tree(ref["files"]) if ref.get("files") else None
        used = [root] if root else []  # the reference's code, its cases' dirs and outputs
        for case in stale:
            if ref.get("fn"):
                fn = getattr(_module(ref["module"]), ref["fn"])
                stdout, files = fn(case.get("stdin", case.get("files"))), {}
            else:
                argv = ref.get("argv") or spec["answer"]["argv"]
                res, files = run_case(argv, root, case, spec, cpu=None, made=used)
                if not res.ok:
                    raise SystemExit("reference failed: " + res.error)
                stdout = res.stdout
            case["want"] = expectation(spec["compare"], stdout, files)
        # Agent code runs next: it must neither run the reference's code nor read its outputs.
        close_to_runs(used)
    if any(case.get("by_reference") for case in cases):
        _call_reference(spec, cases)
    return cases


def _call_reference(spec, cases):
    """Expected values only the checker's Python can make (argparse's words): a Python
    answer's code, run now, before any agent code, on a read-only copy of the reference's
    files, gives the ``by_reference`` cases theirs."""
    answer, limits = spec["answer"], spec.get("limits", {})
    root = read_only_dir(spec["reference"]["files"], "ref-")
    res = run_python(
        answer["code"],
        answer.get("input"),
        cwd=root,
        timeout=limits.get("timeout", 60),
        reference=True,
    )
    close_to_runs([root])
    if not res.ok or not isinstance(res.value, list) or len(res.value) != len(cases):
        raise SystemExit("reference failed: " + (res.error or "not one value a case"))
    for case, value in zip(cases, res.value):
        if case.get("by_reference"):
            case["want"] = value


def expectation(compare, stdout, files):
    """The expected value a reference's output makes, in the comparison's own terms."""
    if compare["how"] == "lines":
        return {"lines": lines(stdout)}
    return {"stdout": stdout, "files": files}


def _argv(template, app, where):
    return [a.replace("{app}", app or "").replace("{in}", where) for a in template]


def run_case(template, app, case, spec, cpu, made=None):
    """``(result, output files)`` of one run of ``template`` on ``case``; the run's directory
    is added to ``made`` when given."""
    limits = spec.get("limits", {})
    answer = spec["answer"]
    where = case_dir(case.get("files"), case.get("tree"), answer.get("writable"))
    if made is not None:
        made.append(where)
    kept = {name: os.path.join(where, name) for name in answer.get("kept", ())}
    for path in kept.values():
        age(path)
    before = {name: stamps(path) for name, path in kept.items()}
    res = run_command(
        _argv(list(template) + list(case.get("args") or ()), app, where),
        cwd=app or where,
        stdin=case.get("stdin", ""),
        timeout=limits.get("timeout", 60),
        cpu_seconds=cpu,
        memory_mb=limits.get("memory_mb"),
    )
    out_dir = answer.get("out_dir")
    outputs = read_outputs(os.path.join(where, out_dir)) if out_dir else {}
    how = answer.get("tree_modes", False), answer.get("gunzip", False)
    res.trees = {
        name: read_tree(os.path.join(where, name), *how) for name in answer.get("trees", ())
    }
    res.rewritten = {name: _changed(before[name], stamps(path)) for name, path in kept.items()}
    res.looked = {path: look(path) for path in answer.get("look", ())}
    close_to_runs([where])  # nothing of this case (inputs, outputs, files left) for later runs
    return res, outputs


def _changed(before, after):
    """The paths whose file was rewritten, replaced or removed (``kept``)."""
    return sorted(rel for rel, stamp in before.items() if after.get(rel) != stamp)


def build(ck, answer, limits):
    """A private copy of /app (built as nobody when the answer has a build step), or None when
    the build failed (recorded as a compile error)."""
    work = copy_tree_for_child("/app", prefix="app-")
    if not answer.get("build"):
        return work
    env = dict(answer.get("build_env") or {})
    cache = make_private_dir("cache-")
    os.chown(cache, NOBODY, NOBODY)
    env.update(GOCACHE=os.path.join(cache, "go"), GOPATH=os.path.join(cache, "gopath"))
    res = run_command(
        list(answer["build"]), cwd=work, env=env, timeout=limits.get("build_timeout", 240)
    )
    if res.ok:
        return work
    failure = (res.stderr or res.stdout or res.error).strip()[-800:] or res.error
    ck.compile_errors.append(failure)
    print("BUILD FAILED " + failure)
    return None


def run_program(ck, spec, cases):
    answer, limits = spec["answer"], spec.get("limits", {})
    if answer.get("compile"):
        ck.compile_python(*answer["compile"])
    work = build(ck, answer, limits)
    for case in cases:
        if work is None:
            ck.error(case["label"], "the program did not build")
            continue
        cpu = case.get("cpu", limits.get("cpu"))
        res, files = run_case(answer["argv"], work, case, spec, cpu)
        if not _ran(res, answer.get("status")):
            ck.error(case["label"], res.error or res.stderr[-300:])
            continue
        got = {"stdout": res.stdout, "files": files}
        if answer.get("trees"):
            got["trees"] = res.trees
        if answer.get("kept"):
            got["rewritten"] = res.rewritten
        if answer.get("look"):
            got["looked"] = res.looked
        if answer.get("status"):
            got["status"] = res.returncode
        if answer.get("stderr"):
            got["stderr"] = res.stderr.strip()[-answer["stderr"] :]
        compare(ck, case["label"], case["want"], got, spec["compare"])


def _ran(res, status):
    """Whether a run has an output to compare: it exited 0 or (``status``: its exit status is
    part of its output) exited at all, without a Python traceback."""
    if not status:
        return res.ok
    crashed = "Traceback (most recent call last)" in (res.stderr or "")
    return res.returncode is not None and res.returncode >= 0 and not crashed


def compare(ck, label, want, got, opts):
    """One case's checks: a comparison of ``palaestra_compare``, or (``function``) a function
    of a module the task ships in ``tests/``."""
    if opts["how"] == "function":
        return getattr(_module(opts["module"]), opts["fn"])(ck, label, want, got, opts)
    return COMPARE[opts["how"]](ck, label, want, got, opts)


def _calls(answer, cases):
    """``(call, its cases)`` of a Python answer, in order."""
    start, out = 0, []
    for call in answer.get("calls") or [answer]:
        n = call.get("cases")
        mine = cases[start : start + n if n is not None else len(cases)]
        start += len(mine)
        out.append((call, mine))
    return out


def made_inputs(calls):
    """Each call's input made again from its seed (``make``), first; should this Python make
    other data, its ``reference`` function (of the same module in ``tests/``, called with the
    input and the maker's ``args``) gives its cases' expected values on it."""
    for call, mine in calls:
        make = call.get("make")
        if make is None:
            continue
        call["input"] = value = _made(make)
        if made_stale(value, make):
            print("NOTE this Python made other data from a seed: the reference runs on it")
            fn = getattr(_module(make["module"]), call["reference"])
            wants = fn(value, *make.get("args", ()))
            for case, want in zip(mine, wants):
                case["want"] = want


def run_call(ck, spec, cases):
    """One Python child a call (``answer["calls"]``, else the answer itself), each in a fresh
    copy of /app: its ``code`` emits one value for each of its cases."""
    answer, limits = spec["answer"], spec.get("limits", {})
    calls = _calls(answer, cases)
    made_inputs(calls)
    if answer.get("compile"):
        ck.compile_python(*answer["compile"])
    for call, mine in calls:
        work = copy_tree_for_child("/app", prefix="app-")
        res = run_python(
            call["code"],
            call.get("input"),
            cwd=work,
            timeout=limits.get("timeout", 60),
            cpu_seconds=call.get("cpu") or limits.get("cpu"),
            memory_mb=limits.get("memory_mb"),
        )
        close_to_runs([work])  # nothing this call left is seen by the next
        values = res.value if res.ok and isinstance(res.value, list) else None
        opts = call.get("compare") or spec["compare"]
        for i, case in enumerate(mine):
            if values is None:
                ck.error(case["label"], res.error or "the answer did not emit one value a case")
            else:
                got = values[i] if i < len(values) else None
                compare(ck, case["label"], case["want"], got, opts)


#: The child that runs an SQLite answer: read-only databases, an authorizer that lets only
#: reads through (no ATTACH, PRAGMA, writes or extensions), one statement.
_SQLITE_CHILD = r"""
import sqlite3
ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
           getattr(sqlite3, "SQLITE_RECURSIVE", 33)}
def gate(action, *args):
    return sqlite3.SQLITE_OK if action in ALLOWED else sqlite3.SQLITE_DENY
path, dbs = INPUT
with open(path) as f:
    sql = f.read()
out = []
for db in dbs:
    con = sqlite3.connect("file:" + db + "?mode=ro", uri=True)
    con.set_authorizer(gate)
    try:
        cur = con.execute(sql)
        rows = [[v if not isinstance(v, bytes) else "x'" + v.hex() + "'" for v in r]
                for r in cur]
        out.append({"columns": [d[0] for d in cur.description or ()], "rows": rows})
    except sqlite3.Error as e:
        out.append({"error": "{}: {}".format(type(e).__name__, e)})
    con.close()
emit(out)
"""


def run_sqlite(ck, spec, cases):
    answer, limits = spec["answer"], spec.get("limits", {})
    path = answer["file"]
    if not os.path.isfile(path) or os.path.islink(path):
        ck.check(path + " exists", False, "no " + path)
        return
    where = readonly_tree({f"db{i}.sqlite": c["db"] for i, c in enumerate(cases)})
    dbs = [os.path.join(where, f"db{i}.sqlite") for i in range(len(cases))]
    res = run_python(
        _SQLITE_CHILD,
        [path, dbs],
        cwd=where,
        timeout=limits.get("timeout", 60),
        cpu_seconds=limits.get("cpu"),
        memory_mb=limits.get("memory_mb"),
    )
    if not res.ok:
        ck.check(os.path.basename(path) + " runs", False, res.error)
        return
    for case, got in zip(cases, res.value):
        if "error" in got:
            ck.error(case["label"], got["error"])
            continue
        COMPARE[spec["compare"]["how"]](ck, case["label"], case["want"], got, spec["compare"])


def run_postgres(ck, spec, cases):
    import palaestra_pg

    palaestra_pg.run_answer(
        ck,
        spec,
        cases,
        lambda label, want, got: COMPARE[spec["compare"]["how"]](
            ck, label, want, got, spec["compare"]
        ),
    )


def run_function_check(ck, spec, cases):
    import palaestra_calls

    palaestra_calls.run_check(ck, spec, cases)


def run_state(ck, spec, cases):
    """Nothing runs: the agent's work is what it left in the sandbox; each case looks at its
    ``path`` (see :func:`look`)."""
    for case in cases:
        compare(ck, case["label"], case["want"], look(case["path"]), spec["compare"])


RUNNERS = {
    "program": run_program,
    "python": run_call,
    "sqlite": run_sqlite,
    "postgres": run_postgres,
    "state": run_state,
    "check": run_function_check,
}


def main(spec=None):
    spec = spec if spec is not None else precomputed(SPEC)
    ck = Checker(kind=spec.get("kind"))
    require = spec["answer"].get("require")
    if require and (os.path.islink(require) or not os.path.isfile(require)):
        ck.error(require + " exists", "no " + require)
        ck.finish()
    # every part's expected values are fixed before any agent code runs
    parts = [spec] + [dict({"reference": {}}, **part) for part in spec.get("also", ())]
    cases = [materialise(part) for part in parts]
    for part, mine in zip(parts, cases):
        RUNNERS[part["answer"]["kind"]](ck, part, mine)
    after = spec.get("finish")  # numbers of the task's own beside the reward (CURE's)
    extra = dict(getattr(_module(after["module"]), after["fn"])(ck, spec) or {}) if after else {}
    extra.update(graded(spec, ck.passed, len(ck.results)) or {})
    ck.finish(extra or None)


def graded(spec, passed, total):
    """The reward of a partial-credit spec (``reward: "partial"``): the fraction of checks
    passed; None (1 only when every check passed) otherwise."""
    if spec.get("reward") != "partial":
        return None
    return {"reward": round(passed / total, 4) if total else 0.0}


if __name__ == "__main__":
    main()
