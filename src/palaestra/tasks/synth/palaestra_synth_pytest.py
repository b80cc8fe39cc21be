"""pytest plugin of synthesised bug-fix tasks: selects tests by node id, records every outcome.

Loaded with ``-p palaestra_synth_pytest`` both at synthesis (on the host, in the project's
environment) and by a task's hidden ``test.sh``; it imports nothing of palaestra. Variables:

* ``PALAESTRA_SYNTH_SELECT``: a file of node ids, one a line: only those run.
* ``PALAESTRA_SYNTH_REPORT``: where to write the JSON report: ``collected`` (node ids),
  ``errors`` (collection errors), ``outcomes`` (node id -> passed, failed, error, skipped) and
  ``messages`` (node id -> the ``E`` lines of a failure).
* ``PALAESTRA_SYNTH_TRACE``: a directory; every function under it a test calls is recorded
  (``calls``: node id -> ``[relative path, first line]`` pairs), through ``sys.setprofile``
  during the test's set-up and call.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

_SELECT = os.environ.get("PALAESTRA_SYNTH_SELECT")
_REPORT = os.environ.get("PALAESTRA_SYNTH_REPORT")
_TRACE = os.environ.get("PALAESTRA_SYNTH_TRACE")
_MESSAGE_CHARS = 4000

_state: dict = {"collected": [], "errors": [], "outcomes": {}, "messages": {}, "calls": {}}


def pytest_collection_modifyitems(session, config, items):
    if _SELECT:
        with open(_SELECT, encoding="utf-8") as f:
            wanted = {line.rstrip("\n") for line in f if line.strip()}
        keep = [item for item in items if item.nodeid in wanted]
        dropped = [item for item in items if item.nodeid not in wanted]
        items[:] = keep
        if dropped:
            config.hook.pytest_deselected(items=dropped)
    _state["collected"] = [item.nodeid for item in items]


def pytest_collectreport(report):
    if report.failed:
        _state["errors"].append({"nodeid": report.nodeid, "message": _text(report)[-2000:]})


def _text(report) -> str:
    try:
        return report.longreprtext
    except Exception:  # noqa: BLE001 - a report without a text is no message
        return ""


def _message(report) -> str:
    lines = [line for line in _text(report).splitlines() if line.startswith("E ")]
    return "\n".join(lines)[:_MESSAGE_CHARS]


def pytest_runtest_logreport(report):
    outcomes = _state["outcomes"]
    nodeid = report.nodeid
    if report.when == "call":
        if hasattr(report, "wasxfail"):
            outcomes[nodeid] = "skipped"
        else:
            outcomes[nodeid] = report.outcome
        if report.failed:
            _state["messages"][nodeid] = _message(report)
    elif report.failed:  # set-up or teardown
        outcomes[nodeid] = "error"
        _state["messages"].setdefault(nodeid, _message(report))
    elif report.skipped and nodeid not in outcomes:
        outcomes[nodeid] = "skipped"


if _TRACE:
    _ROOT = os.path.realpath(_TRACE) + os.sep

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        seen: set = set()

        def profile(frame, event, arg):
            if event == "call":
                code = frame.f_code
                seen.add((code.co_filename, code.co_firstlineno))

        sys.setprofile(profile)
        try:
            yield
        finally:
            sys.setprofile(None)
            calls = set()
            for filename, line in seen:
                path = os.path.realpath(filename)
                if path.startswith(_ROOT):
                    calls.add((path[len(_ROOT) :], line))
            _state["calls"][item.nodeid] = sorted(calls)


def pytest_sessionfinish(session, exitstatus):
    if _REPORT:
        tmp = _REPORT + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(_state, f)
        os.replace(tmp, _REPORT)
