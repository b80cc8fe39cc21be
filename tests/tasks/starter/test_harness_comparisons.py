"""The starter tasks whose hidden test calls the agent's functions in a harness child: their
specs fix every expected value and make large inputs again from a seed, and the comparisons
they ship in ``tests/`` tell a right result from near misses."""

from __future__ import annotations

import copy
import json
import marshal
import random
import zlib
from types import ModuleType

import pytest

from palaestra.tasks import starter_harness_calls, starter_harness_packages
from palaestra.tasks.generators.harness_spec import SPEC, digest
from tests.tasks.starter.pack import PACK_DIR

CALL_TASKS = sorted({**starter_harness_calls.BUILDERS, **starter_harness_packages.BUILDERS})


def _spec(task_id: str) -> dict:
    return marshal.loads(zlib.decompress((PACK_DIR / task_id / "tests" / SPEC).read_bytes()))


def _module(task_id: str, name: str) -> ModuleType:
    return starter_harness_calls.pack_module(task_id, name, PACK_DIR)


class _Checks:
    def __init__(self) -> None:
        self.seen: list[tuple[str, bool, str]] = []

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        self.seen.append((name, ok, detail))


def _verdict(module: ModuleType, want: object, got: object) -> tuple[bool, str]:
    ck = _Checks()
    module.check(ck, "case", want, got, {})
    ((_, ok, detail),) = ck.seen
    return ok, detail


@pytest.mark.parametrize("task_id", CALL_TASKS)
def test_call_specs_fix_expected_values_before_agent_code(task_id: str) -> None:
    """A Python answer, every case with its expected value; a call whose input is made in
    the checker names the maker, its seed and the digest of what it made at build time, and a
    reference function that gives expected values should the checker's Python make other
    data."""
    spec = _spec(task_id)
    assert spec["answer"]["kind"] == "python"
    assert spec["cases"] and all("want" in c for c in spec["cases"])
    for call in spec["answer"]["calls"]:
        make = call.get("make")
        if make is None:
            assert call["input"] is not None
            continue
        maker = _module(task_id, make["module"])
        made = getattr(maker, make["fn"])(random.Random(make["seed"]), *make["args"])
        assert digest({"": made}) == make["sha256"], "the checker makes the same input"
        assert callable(getattr(maker, call["reference"]))


def test_route_check_walks_the_route() -> None:
    """toll-budget-route: the reference's minutes with a valid route pass; the right minutes
    with a route that leaves the road network, or over the budget, or wrong minutes fail."""
    task = "algorithms-medium-toll-budget-route"
    routes = _module(task, "route_cases")
    case = {"n": 4, "roads": [[0, 1, 5, 10], [0, 2, 4, 0], [2, 1, 4, 1], [1, 3, 1, 0]]}
    case.update(src=0, dst=3, budget=5)
    routes._CASES[:] = [case]
    want = routes.expected([case])[0]
    assert want == {"case": 0, "minutes": 9}
    assert _verdict(routes, want, {"minutes": 9, "path": [1, 2, 3]}) == (True, "")
    assert not _verdict(routes, want, {"minutes": 9, "path": [0, 3]})[0]  # 10 in tolls
    assert not _verdict(routes, want, {"minutes": 9, "path": [1, 3]})[0]  # not connected
    assert not _verdict(routes, want, {"minutes": 6, "path": [0, 3]})[0]
    assert not _verdict(routes, want, {"none": 1})[0]
    routes._CASES.clear()


def test_override_check_wants_the_named_variable_in_the_error() -> None:
    task = "software-engineering-easy-env-overrides"
    overrides = _module(task, "override_cases")
    want = {"error_for": "APP_SERVER__MISSING"}
    assert _verdict(overrides, want, {"error": "unknown APP_SERVER__MISSING"})[0]
    assert not _verdict(overrides, want, {"error": "unknown setting"})[0]
    assert not _verdict(overrides, want, {"config": {}})[0]
    right = overrides.expected(overrides.cases())[1]
    assert _verdict(overrides, right, copy.deepcopy(right))[0]
    wrong = copy.deepcopy(right)
    wrong["config"]["server"]["port"] = ["str", "9090"]
    assert not _verdict(overrides, wrong, right)[0]


def test_inventory_check_allows_float_noise_only_in_values() -> None:
    inventory = _module("debugging-easy-inventory-csv", "inventory_cases")
    want = inventory.expected(inventory.cases())[0]
    got = copy.deepcopy(want)
    category = next(iter(got["summary"]))
    got["summary"][category][2] += 1e-9
    assert _verdict(inventory, want, got)[0]
    got["summary"][category][1] += 1
    assert not _verdict(inventory, want, got)[0]
    assert not _verdict(inventory, want, {**want, "items": want["items"][1:]})[0]
    assert not _verdict(inventory, want, "raised ValueError")[0]


def test_todo_check_names_the_first_step_that_differs() -> None:
    todo = _module("software-engineering-medium-todo-due-dates", "todo_cases")
    scenario = todo.cases()[0]
    want = todo.expected([scenario])[0]

    def seen(step_want: dict) -> dict:
        stdout = json.dumps(step_want["json"]) if "json" in step_want else step_want.get("stdout")
        file = step_want["file"]
        return {
            "rc": step_want["rc"],
            "stdout": stdout or "",
            "stderr": "",
            "changed": file is not None,
            "file": json.dumps(file) if file is not None else "{}",
        }

    right = [seen(w) for w in want["steps"]]
    assert _verdict(todo, want, right) == (True, "")
    reused = copy.deepcopy(right)
    reused[1]["stdout"] = "added 7\n"
    ok, detail = _verdict(todo, want, reused)
    assert not ok and detail.startswith("step 1: todo add B")
    wrote = copy.deepcopy(right)
    listing = next(i for i, args in enumerate(want["args"]) if args[0] == "list")
    wrote[listing]["changed"] = True
    ok, detail = _verdict(todo, want, wrote)
    assert not ok and "the data file changed" in detail
    assert not _verdict(todo, want, right[:-1])[0]
