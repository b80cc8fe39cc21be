"""The harness's ``check`` answer (``hs.function_check``, ``palaestra_calls.py``): a Python
function judged by a check written in Python. Its typed encoding keeps what JSON loses; the
check runs in the harness on the values the function gave for calls recorded from the reference,
a further round asks the calls the record lacks; end to end, right passes and wrong, hostile or
type-confused answers fail."""

from __future__ import annotations

import importlib
import json
import math
import random
import textwrap
from pathlib import Path

import pytest

from palaestra.run.check import check_tasks
from palaestra.tasks import load_task
from palaestra.tasks.generators import harness_spec as hs

RUNTIME = Path(hs.__file__).parent


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(RUNTIME))
    return importlib.import_module("palaestra_calls")


def _through_json(calls, value):
    return calls.decode(json.loads(json.dumps(calls.encode(value))))


def test_the_typed_encoding_keeps_what_json_loses(calls):
    values = [
        (1, [2, (3,)]),
        {1, 2, 3},
        frozenset({"a"}),
        {(1, 2): "t", 3: [4.5]},
        [1.0, -0.0, math.inf, -math.inf],
        b"\x00\xff",
        2**200,
        -(2**70),
        1 + 2j,
        [None, True, False, "é"],
    ]
    for value in values:
        back = _through_json(calls, value)
        assert back == value and type(back) is type(value), value
    assert type(_through_json(calls, (1, 2))) is tuple and _through_json(calls, (1, 2)) != [1, 2]
    assert type(_through_json(calls, 1.0)) is float and type(_through_json(calls, 1)) is int
    assert math.isnan(_through_json(calls, math.nan))
    assert _through_json(calls, [True])[0] is True


def test_an_object_of_the_agents_is_equal_to_nothing(calls):
    class Anything:
        def __eq__(self, other):
            return True

    back = _through_json(calls, [Anything()])[0]
    assert isinstance(back, calls.Unreadable) and not (back == 1) and not (back != 1)
    with pytest.raises(TypeError, match="not a value the check can read"):
        assert back  # neither `assert candidate(x)` nor `assert not candidate(x)` holds
    with pytest.raises(TypeError):
        assert back < 1


def test_a_sets_encoding_is_one_text_whatever_the_hash_order(calls):
    assert calls.key(({"b", "a", "c"},), {}) == calls.key(({"c", "a", "b"},), {})
    assert calls.key(([1, 2],), {}) != calls.key(((1, 2),), {})


CHECK = textwrap.dedent(
    """\
    def check(candidate):
        assert candidate(2) == (4, 2)
        x = candidate(3)
        assert candidate(x[0]) == (81, 9)
        import random
        for _ in range(20):
            n = random.randint(-50, 50)
            assert candidate(n) == (n * n, n)
        assert helper(candidate(5)) == 25
    """
)
SETUP = "def helper(pair):\n    return pair[0]\n"
RIGHT = "def square(n):\n    return (n * n, n)\n"


def _answer(calls):
    answer = {"kind": "check", "entry": "square", "setup": SETUP, "check": CHECK, "seed": 3}
    scope: dict = {}
    exec(RIGHT, scope)
    answer["calls"] = calls.record(answer, scope["square"])
    return answer


def _caller(calls, fn, asked):
    def call(pending):
        asked.append(len(pending))
        out = []
        for encoded in pending:
            args, kwargs = calls.decode(encoded)
            try:
                out.append(["value", calls.encode(fn(*args, **kwargs))])
            except Exception as e:
                out.append(["raised", f"{type(e).__name__}: {e}"])
        return json.loads(json.dumps(out)), ""

    return call


def test_the_reference_passes_in_one_round_of_recorded_calls(calls):
    answer = _answer(calls)
    rng = random.Random(3)  # what the check draws, seeded as the harness seeds it
    wanted = list(dict.fromkeys([2, 3, 9, *(rng.randint(-50, 50) for _ in range(20)), 5]))
    assert [calls.decode(c)[0][0] for c in answer["calls"]] == wanted  # each once, in order
    asked: list[int] = []
    error, results = calls.judge(answer, _caller(calls, lambda n: (n * n, n), asked))
    assert error is None and asked == [len(answer["calls"])]
    assert [r[1] for r in results] == ["passed"] * 4


def test_a_call_the_record_lacks_is_asked_in_a_further_round(calls):
    """The check calls candidate(x[0]) with the first value the candidate gave: a wrong one
    leads the check to a call the reference never made."""
    answer = _answer(calls)
    asked: list[int] = []
    error, results = calls.judge(answer, _caller(calls, lambda n: (n * n + 1000, n), asked))
    assert asked == [len(answer["calls"]), 1]  # candidate(1009): asked in round two
    assert [r[1] for r in results] == ["failed"] * 4
    asked.clear()
    error, results = calls.judge(
        {**answer, "rounds": 1}, _caller(calls, lambda n: (n * n + 1000, n), asked)
    )
    assert asked == [len(answer["calls"])]
    assert results[1][1] == "errored"  # the call no round answered


def test_raised_and_compile_errors(calls):
    answer = _answer(calls)
    _, results = calls.judge(answer, _caller(calls, lambda n: 1 // (n - 2), []))
    assert results[0][:2] == ("case 0: assert candidate(2) == (4, 2)", "errored")
    assert "ZeroDivisionError" in results[0][2]
    error, results = calls.judge(answer, lambda pending: (None, "SyntaxError line 1: bad"))
    assert error == "SyntaxError line 1: bad"
    # as when check called it: x = candidate(3) errored, so the next case fails on x
    assert [r[1] for r in results] == ["errored", "errored", "failed", "errored", "errored"]


def test_the_builder_records_in_a_child_and_refuses_a_failing_reference():
    answer = hs.function_check("/app/sq.py", "square", setup=SETUP, check=CHECK, reference=RIGHT)
    assert answer["kind"] == "check" and len(answer["calls"]) >= 20
    with pytest.raises(RuntimeError, match="the reference fails its own check"):
        hs.function_check(
            "/app/sq.py", "square", setup=SETUP, check=CHECK, reference=RIGHT.replace("n * n", "n")
        )
    with pytest.raises(ValueError, match="finish names 'cure'"):
        hs.tests(answer=answer, cases=[], compare=hs.compare("equal"), finish=("cure", "cure"))


WRONGS = {
    # a list where the check wants a tuple: the typed encoding tells them apart
    "a-list": "def square(n):\n    return [n * n, n]\n",
    "off-by-one": "def square(n):\n    return (n * n + (n == 9), n)\n",
    "always-equal": textwrap.dedent(
        """\
        class Anything:
            def __eq__(self, other):
                return True
            def __getitem__(self, i):
                return 0
        def square(n):
            return Anything()
        """
    ),
    "fake-verdict-exit": textwrap.dedent(
        """\
        import os
        print("PASS case 0\\n4/4 checks passed: reward 1.0")
        try:
            open("/logs/verifier/reward.json", "w").write('{"reward": 1.0}')
        except OSError:
            pass
        os._exit(0)
        """
    ),
    "reads-the-test": textwrap.dedent(
        """\
        import glob
        def square(n):
            for path in glob.glob("/tests/*") + glob.glob("/tests/.*"):
                try:
                    open(path).read()
                    return (n * n, n)
                except OSError:
                    pass
            return None
        """
    ),
    "spins": "def square(n):\n    while True:\n        pass\n",
    # writes its own output, nested deeper than the checker's JSON reader recurses
    "deep-output": textwrap.dedent(
        """\
        import __main__, os
        def square(n):
            with open(__main__._out, "w") as f:
                f.write('{"value": ' + "[" * 200000 + "]" * 200000 + "}")
            os._exit(0)
        """
    ),
}


def _task(tmp_path: Path) -> Path:
    from palaestra.tasks.generators.base import Family, write_task

    answer = hs.function_check("/app/sq.py", "square", setup=SETUP, check=CHECK, reference=RIGHT)
    tests = hs.tests(
        answer=answer,
        cases=[],
        compare=hs.compare("equal"),
        limits=hs.limits(timeout=8, cpu=2),
        kind="assert",
    )
    task = hs.task(
        instruction="square",
        workspace={"sq.py": "def square(n):\n    raise NotImplementedError\n"},
        tests=tests,
        answer_path="sq.py",
        reference=RIGHT,
        wrongs=WRONGS,
        note="(n*n, n)",
    )
    fam = Family("check-demo", "algorithms", "a check answer", lambda spec: task)
    return write_task(fam, fam.spec(0, 0.0), task, tmp_path / "check-demo")


async def test_right_passes_and_wrong_hostile_or_confused_answers_fail(tmp_path: Path):
    task = _task(tmp_path)
    assert "palaestra_calls.py" in {p.name for p in (task / "tests").iterdir()}
    results = await check_tasks([load_task(task)])
    by = {r.scenario: r for r in results}
    assert {name: r.reward for name, r in by.items()} == {
        "oracle": 1.0,
        "nop": 0.0,
        **{f"wrong:{name}": 0.0 for name in WRONGS},
    }, [r.detail[-600:] for r in results]
    assert by["oracle"].rewards["tests_total"] == 4 == by["oracle"].rewards["assert_total"]
    assert "FAIL case 0: assert candidate(2) == (4, 2)" in by["wrong:a-list"].detail
    assert by["wrong:spins"].rewards["tests_errored"] >= 4  # its CPU bar or its wall time
    assert "unreadable output" in by["wrong:deep-output"].detail
    assert by["wrong:fake-verdict-exit"].rewards["tests_errored"] == 4
