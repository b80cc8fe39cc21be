"""Families whose cases are made at generation time, on the declarative hidden test
(``harness.bin``: range-queries-c, kv-store-go, build-order and meeting-rooms here,
the rest in tests/tasks/generators/test_harness.py). The hidden test checks against what the
file holds, a missing or unreadable file is an error (never a pass), and for inputs made again
in the checker the reference, run there first, decides whenever a digest differs."""

from __future__ import annotations

import importlib
import importlib.util
import marshal
import random
import shutil
import zlib
from pathlib import Path

import pytest

from palaestra.run.check import check_tasks
from palaestra.tasks import generators as g
from palaestra.tasks import load_task
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import PRECOMPUTED
from tests.tasks.test_generators import _cache  # noqa: F401  (a private generator cache)
from tests.tasks.test_language_families import needs_toolchains

HARNESS = hs.SPEC


def _spec(path: Path) -> dict:
    return marshal.loads(zlib.decompress((path / "tests" / HARNESS).read_bytes()))


def _with_spec(tmp_path: Path, source: Path, spec: dict) -> Path:
    return _copy_with(tmp_path, source, zlib.compress(marshal.dumps(spec, 2), 6), HARNESS)


def test_small_cases_are_shipped_and_large_ones_made_again_from_the_same_seed():
    small = _spec(g.materialise("range-queries-c", 0, 0.5))["cases"]
    assert all(isinstance(c["stdin"], str) and "lines" in c["want"] for c in small)
    big = g.materialise("range-queries-c", 0, 1.0)
    cases = _spec(big)["cases"]
    assert all("stdin" not in c and "lines_sha256" in c["want"] for c in cases)
    assert (big / "tests" / HARNESS).stat().st_size < 4096
    # the checker makes the inputs again as the generator made them: no reference run
    scope: dict = {}
    exec((big / "tests" / "program_inputs.py").read_text(), scope)
    for make in (c["make"] for c in cases):
        text = scope[make["fn"]](random.Random(make["seed"]), *make["args"])
        assert hs.made("program_inputs", make["fn"], make["seed"], make["args"], text) == make
    assert [c.get("cpu") for c in cases] == [None] * 4 + [1]


def _copy_with(
    tmp_path: Path, source: Path, content: bytes | None, name: str = PRECOMPUTED
) -> Path:
    dest = tmp_path / source.name
    shutil.copytree(source, dest)
    target = dest / "tests" / name
    if content is None:
        target.unlink()
    else:
        target.write_bytes(content)
    return dest


@needs_toolchains
async def test_the_checker_uses_the_shipped_cases_and_fails_without_them(tmp_path: Path):
    source = g.materialise("range-queries-c", 0, 0.5)
    spec = _spec(source)
    lines = spec["cases"][-1]["want"]["lines"]
    spec["cases"][-1]["want"]["lines"] = [*lines[:-1], "12345"]
    variants = {
        "tampered": _with_spec(tmp_path / "tampered", source, spec),  # the oracle now disagrees
        "missing": _copy_with(tmp_path / "missing", source, None, HARNESS),
        "corrupt": _copy_with(tmp_path / "corrupt", source, b"not zlib", HARNESS),
    }
    for name, path in variants.items():
        (result,) = await check_tasks([load_task(path)], only=["oracle"])
        assert result.reward != 1.0, name
        if name != "tampered":  # no check ran: an error, not a judgement
            assert not result.rewards.get("checks_total"), (name, result.rewards)


@pytest.mark.slow
@needs_toolchains
async def test_a_digest_that_differs_falls_back_to_the_reference(tmp_path: Path):
    source = g.materialise("range-queries-c", 0, 1.0)
    spec = _spec(source)
    for case in spec["cases"]:
        case["make"]["sha256"] = "0" * 64  # made otherwise here: expected values not trusted
        case["want"] = {"lines_sha256": "0" * 64, "count": 0}
    task = load_task(_with_spec(tmp_path, source, spec))
    results = await check_tasks([task], only=["oracle", "wrong:int-sums"])
    assert {r.scenario: r.reward for r in results} == {"oracle": 1.0, "wrong:int-sums": 0.0}
    assert "the reference runs on it" in results[0].detail


@pytest.mark.parametrize(
    ("family", "data"), [("range-queries-c", HARNESS), ("kv-store-go", HARNESS)]
)
def test_precomputed_cases_are_deterministic(family: str, data: str):
    assert g.generate(family, 3, 0.9).tests[data] == g.generate(family, 3, 0.9).tests[data]


@pytest.mark.slow
@pytest.mark.parametrize(("family", "data"), [("build-order", HARNESS), ("meeting-rooms", HARNESS)])
async def test_python_families_error_without_their_cases(family: str, data: str, tmp_path: Path):
    source = g.materialise(family, 0, 0.9)
    assert (source / "tests" / data).stat().st_size < 300_000
    tasks = [load_task(source)]
    tasks += [
        load_task(_copy_with(tmp_path / k, source, v, data)) for k, v in (("m", None), ("c", b"x"))
    ]
    results = await check_tasks(tasks, only=["oracle"])
    assert [r.reward for r in results] == [1.0, 0.0, 0.0], [r.detail[-300:] for r in results]
    assert [bool(r.rewards.get("checks_total")) for r in results] == [True, False, False]


def _made_again(tests: Path, make: dict) -> object:
    """What the checker's ``_made`` gives: the task's input module called as it calls it."""
    spec = importlib.util.spec_from_file_location(make["module"], tests / f"{make['module']}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, make["fn"])(random.Random(make["seed"]), *make.get("args", ()))


@pytest.mark.parametrize("family", [f.name for f in g.families()])
def test_inputs_made_again_in_the_checker_match_the_generators(family: str, monkeypatch):
    """Each input the checker makes again from its seed has the digest the generator recorded,
    by the shipped rule (``palaestra_compare.made_stale``): else the reference runs again in
    every verification. build-order's call input, a dict, was digested one way by the
    generator and another by the checker (the reference ran at every verification)."""
    monkeypatch.syspath_prepend(str(Path(hs.__file__).parent))
    compare = importlib.import_module("palaestra_compare")
    for difficulty in (0.5, 0.9):
        tests = g.materialise(family, 0, difficulty) / "tests"
        if not (tests / HARNESS).is_file():
            continue
        monkeypatch.syspath_prepend(str(tests))
        spec = _spec(tests.parent)
        for part in [spec, *spec.get("also", ())]:
            answer = part["answer"]
            makes = [c["make"] for c in part["cases"] if c.get("make")]
            makes += [c["make"] for c in [answer, *answer.get("calls", ())] if c.get("make")]
            for make in makes:
                assert not compare.made_stale(_made_again(tests, make), make), (family, make)
