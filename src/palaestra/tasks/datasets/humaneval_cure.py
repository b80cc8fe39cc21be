"""CURE on a HumanEval task (stdlib only; shipped in its ``tests/`` and called by
``palaestra_harness`` after the ground-truth checks, its ``finish``).

When ``/app/test_solution.py`` is present, the policy's ``test_*`` functions run, as nobody and
one variant at a time in a random order, against the reference, mutants of it that the
ground-truth check rejects (judged like the agent's code: ``palaestra_calls``), and the policy's
own code; the pass matrix gives the test reward (docs/rewards.md).
"""

import os
import random
import shutil

import palaestra_calls
from palaestra_check import NOBODY, kill_nobody_processes, private_dir, run_command, run_python

MUTANTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cure")
MUTANT_LIMITS = {"timeout": 10, "cpu": 10}

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


def _rejected(answer, path):
    """Whether the ground-truth check rejects the mutant at ``path``."""
    mirror = private_dir("mutant-")
    shutil.copy(path, os.path.join(mirror, os.path.basename(answer["file"])))
    os.chown(os.path.join(mirror, os.path.basename(answer["file"])), NOBODY, NOBODY)
    _, results = palaestra_calls.grade(mirror, answer, MUTANT_LIMITS)
    _scrub()
    return any(r[1] != "passed" for r in results)


def cure(ck, spec, max_wrong=4):
    """``cure_code_reward`` (the fraction of ground-truth cases passed) and CURE's test reward
    and counts, or zero tests when the policy wrote none."""
    answer = spec["answer"]
    fraction = ck.passed / len(ck.results) if ck.results else 0.0
    out = {"cure_code_reward": fraction}
    read = run_command(["cat", "/app/test_solution.py"], cwd="/", timeout=10)
    if not read.ok or not read.stdout.strip():
        out.update(cure_test_reward=-1.0, cure_tests_total=0.0, cure_tests_accurate=0.0)
        out["cure_wrong_total"] = 0.0
        return out
    tests = read.stdout
    with open(os.path.join(MUTANTS_DIR, "reference.py")) as f:
        reference = f.read()
    wrong = []
    for name in sorted(os.listdir(MUTANTS_DIR)):
        path = os.path.join(MUTANTS_DIR, name)
        if name.startswith("mutant_") and len(wrong) < max_wrong and _rejected(answer, path):
            with open(path) as f:
                wrong.append(f.read())
    mine = run_command(["cat", answer["file"]], cwd="/", timeout=10).stdout
    code_ok = fraction == 1.0 and not ck.compile_errors
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
    out.update(
        cure_test_reward=sum(per_test) / len(per_test) if per_test else -1.0,
        cure_tests_total=float(len(names)),
        cure_tests_accurate=float(accurate),
        cure_wrong_total=float(n_wrong),
    )
    return out
