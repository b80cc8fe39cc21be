"""The checker's budget for the agent's runs (``palaestra_budget``), run as a checker runs it:
root in a sandbox, launched with ``--alarm`` as test.sh launches it, its runs as nobody.

An answer that spends each case's whole CPU bar, case after case (a relay of forks, each under
its bar), used to outlast the checker's alarm: killed by it, the checker wrote no verdict. Now
the runs that spend the budget are cut, the later ones are not started, and every case is
still reported, in time."""

from __future__ import annotations

import pytest

from tests.tasks.runtime_support import run_in_a_local_sandbox

SCRIPT = r"""
import time
import palaestra_budget
from palaestra_check import run_python
from palaestra_fork import json_dumps

out = {"armed": [palaestra_budget._state["seconds"], palaestra_budget._state["cpu"]]}
SPIN = "while True:\n    pass"
ONE = "emit(1)"

def run(code, **kw):
    start = time.monotonic()
    res = run_python(code, None, cwd="/tmp", timeout=kw.pop("timeout", 30), **kw)
    return [res.ok, res.value, res.error, round(time.monotonic() - start, 1)]

# CPU: 5 s for every run with a bar
palaestra_budget.arm(60, cpu=5)
out["first"] = run(SPIN, cpu_seconds=2)       # its own bar: 2 s (and a little) spent
out["second"] = run(SPIN, cpu_seconds=4)      # 2-3 s left: its bar lowered to 2 or 3
out["third"] = run(ONE, cpu_seconds=2)        # under 1 s left: not started
out["no_bar"] = run(ONE)                      # a run without a bar is not counted
# wall clock: an alarm of 7 s keeps 5 for the verdict, 2 for the runs
palaestra_budget.arm(7)
out["sleeper"] = run("import time\ntime.sleep(30)")
out["after"] = run(ONE)
print(json_dumps(out))
"""


@pytest.fixture(scope="module")
def results() -> dict:
    return run_in_a_local_sandbox(SCRIPT, alarm=90)


def test_the_launcher_arms_the_budget_with_its_alarm(results: dict) -> None:
    assert results["armed"] == [90, 30]  # a third of the alarm, for the runs with a CPU bar


def test_runs_with_a_cpu_bar_share_the_budget(results: dict) -> None:
    ok, _, error, _ = results["first"]
    assert not ok and error == "CPU time limit of 2s exceeded"  # its own bar
    ok, _, error, _ = results["second"]
    assert not ok and "stopped at the checker's budget" in error  # the bar it got: 2-3 s
    ok, _, error, took = results["third"]
    assert not ok and error.startswith("not run: the 5 s of CPU the checker gives")
    assert took < 1  # never started
    assert results["no_bar"][:2] == [True, 1]


def test_runs_end_before_the_alarm_leaves_no_time_for_a_verdict(results: dict) -> None:
    ok, _, error, took = results["sleeper"]
    assert not ok and "stopped at the checker's budget" in error
    assert took < 10  # cut at the deadline (2 s), not at its own 30 s
    ok, _, error, _ = results["after"]
    assert not ok and error.startswith("not run: the checker's 7 s are spent")
