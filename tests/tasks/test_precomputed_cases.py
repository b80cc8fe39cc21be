"""Families whose cases are made at generation time (``tests/precomputed.bin``): the program
families (``_toolchains.precomputed_cases``), and those on the declarative hidden test
(``harness.bin``: build-order and meeting-rooms here, the rest in
tests/tasks/generators/test_harness.py). The
hidden test checks against what the file holds, a missing or unreadable file is an error (never
a pass), and for inputs shipped as digests the reference, run in the checker, decides whenever a
digest differs."""

from __future__ import annotations

import marshal
import random
import shutil
import zlib
from pathlib import Path

import pytest

from palaestra.run.check import check_tasks
from palaestra.tasks import generators as g
from palaestra.tasks import load_task
from palaestra.tasks.generators import _toolchains as tc
from palaestra.tasks.generators.base import PRECOMPUTED, precomputed
from tests.tasks.test_generators import _cache  # noqa: F401  (a private generator cache)
from tests.tasks.test_language_families import needs_toolchains


def _rows(path: Path) -> list:
    return marshal.loads(zlib.decompress((path / "tests" / PRECOMPUTED).read_bytes()))


def test_small_cases_are_shipped_and_large_ones_as_digests_of_the_same_inputs():
    small = _rows(g.materialise("range-queries-c", 0, 0.5))
    assert all(isinstance(stdin, str) and isinstance(want, list) for _, stdin, _, want in small)
    big = g.materialise("range-queries-c", 0, 1.0)
    rows = _rows(big)
    assert all(stdin is None and len(want) == 2 for _, stdin, _, want in rows)
    assert (big / "tests" / PRECOMPUTED).stat().st_size < 4096
    # the hidden test draws the inputs again as the generator drew them
    source = (big / "tests" / "test_hidden.py").read_text()
    scope: dict = {}
    head = source[: source.index("\nfrom palaestra_check import precomputed")]
    exec(head.replace("from palaestra_check import", "# "), scope)
    fresh = scope["make_cases"](random.Random(scope["SECRET"]))
    assert [tc._digest(stdin) for _, stdin, _ in fresh] == [want[0] for *_, want in rows]
    assert [bar for *_, bar in fresh] == [bar for _, _, bar, _ in rows]


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
    rows = _rows(source)
    label, stdin, bar, want = rows[-1]
    tampered = [*rows[:-1], (label, stdin, bar, [*want[:-1], "12345"])]
    variants = {
        "tampered": precomputed(tampered),  # the oracle now disagrees with one expected line
        "missing": None,
        "corrupt": b"not zlib",
    }
    tasks = [load_task(_copy_with(tmp_path / k, source, v)) for k, v in variants.items()]
    for task, name in zip(tasks, variants, strict=True):
        (result,) = await check_tasks([task], only=["oracle"])
        assert result.reward != 1.0, name
        if name != "tampered":  # no check ran: an error, not a judgement
            assert not result.rewards.get("checks_total"), (name, result.rewards)


@needs_toolchains
async def test_a_digest_that_differs_falls_back_to_the_reference(tmp_path: Path):
    source = g.materialise("range-queries-c", 0, 1.0)
    rows = _rows(source)
    assert all(stdin is None for _, stdin, _, _ in rows)
    wrong = [(label, None, bar, (a, "0" * 64)) for label, _, bar, (a, _) in rows]
    task = load_task(_copy_with(tmp_path, source, precomputed(wrong)))
    results = await check_tasks([task], only=["oracle", "wrong:int-sums"])
    assert {r.scenario: r.reward for r in results} == {"oracle": 1.0, "wrong:int-sums": 0.0}


@pytest.mark.parametrize("family", ["range-queries-c", "kv-store-go"])
def test_precomputed_cases_are_deterministic(family: str):
    assert (
        g.generate(family, 3, 0.9).tests[PRECOMPUTED]
        == g.generate(family, 3, 0.9).tests[PRECOMPUTED]
    )


@pytest.mark.parametrize(
    ("family", "data"), [("build-order", "harness.bin"), ("meeting-rooms", "harness.bin")]
)
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
