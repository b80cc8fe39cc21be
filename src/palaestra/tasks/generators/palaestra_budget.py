"""The checker's budget for the agent's runs (stdlib only; shipped in ``tests/`` beside
``palaestra_check.py``).

A checker runs under an alarm (``palaestra_launch --alarm SECONDS``): killed by it, it writes
no verdict, and a task whose cases each allow a run its CPU bar (10 s a case, 23 cases) lets an
answer that spends every bar outlast any alarm. So :func:`arm` (the launcher's, with its alarm)
fixes two bounds over every run of agent code, references aside (they run first):

* a **deadline**, the alarm less a reserve for the comparisons and the verdict: a run gets
  what is left of it as its timeout at most;
* a **CPU budget** over the runs that have a CPU bar (a third of the alarm): a run's bar is
  what is left of it at most. CPU time hardly moves when the machine is busy, so an answer
  that spends its bars is cut by the same case on a quiet machine and on a loaded one.

A run once either is spent is not started: its case fails (``not run: ...``) as a run that ran
out would, every case is still counted, and the verdict is written in time. Without
:func:`arm` (a checker run by hand) nothing is bounded.
"""

import time

#: Seconds of the alarm kept for what follows the last run (comparisons, the verdict).
RESERVE_S, RESERVE_FRACTION = 5.0, 0.1
#: The CPU budget is this fraction of the alarm.
CPU_FRACTION = 1 / 3

_state = {"deadline": None, "cpu_left": None, "seconds": None, "cpu": None}


def arm(seconds, cpu=None):
    """Bound the agent's runs by an alarm of ``seconds`` that starts now; ``cpu``: the CPU
    budget (default :data:`CPU_FRACTION` of the alarm)."""
    start = time.monotonic()
    _state["seconds"] = seconds
    _state["cpu"] = int(seconds * CPU_FRACTION) if cpu is None else cpu
    _state["deadline"] = start + seconds - max(RESERVE_S, seconds * RESERVE_FRACTION)
    _state["cpu_left"] = float(_state["cpu"])


def grant(timeout, cpu_seconds):
    """``(timeout, cpu_seconds, refusal)`` for a run of agent code about to start: its own
    bounds clipped to what is left, and ``refusal`` (a reason, then the run is not started)
    or None. A CPU bar is whole seconds, at least 1."""
    deadline, left = _state["deadline"], _state["cpu_left"]
    if deadline is not None:
        wall = deadline - time.monotonic()
        if wall < 1:
            why = f"the checker's {_state['seconds']} s are spent"
            return timeout, cpu_seconds, f"not run: {why} (earlier runs took them)"
        timeout = min(timeout, wall) if timeout is not None else wall
    if cpu_seconds is not None and left is not None:
        if left < 1:
            why = f"the {_state['cpu']} s of CPU the checker gives the agent's runs are spent"
            return timeout, cpu_seconds, f"not run: {why} (earlier runs took them)"
        cpu_seconds = min(cpu_seconds, int(left))
    return timeout, cpu_seconds, None


def spend(cpu_seconds, used, over):
    """Count a run with the bar ``cpu_seconds`` (None: not counted) that used ``used`` seconds
    of CPU, or (``over``) was stopped at its bar."""
    if cpu_seconds is None or _state["cpu_left"] is None:
        return
    _state["cpu_left"] -= max(used, cpu_seconds) if over else min(used, cpu_seconds)


def cut(asked, granted):
    """The reason to give for a run stopped at a bound :func:`grant` lowered from ``asked``
    to ``granted`` (None when it did not lower it)."""
    if granted is None or asked is not None and granted >= asked:
        return None
    return "stopped at the checker's budget (earlier runs spent the rest)"
