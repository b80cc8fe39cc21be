"""The declarative hidden test (``generators.harness_spec`` writes ``tests/harness.bin``,
``palaestra_harness.py`` runs it): the optimization and data-querying families are data plus
the one harness; a large input is made again in the checker as the generator made it, and when
it is not, the reference runs first and decides; a program's run cannot change its inputs, and
its output directory is read without following links (a FIFO there does not hang the checker).
"""

from __future__ import annotations

import marshal
import random
import textwrap
import zlib
from pathlib import Path

import pytest

from palaestra import CodeEnv
from palaestra.llm import ScriptedPolicy
from palaestra.run import rollout
from palaestra.run.check import check_tasks
from palaestra.sandbox.local import LocalBackend
from palaestra.tasks import generators as g
from palaestra.tasks import load_task
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators import write as write_generated
from palaestra.tasks.source import TaskSet
from tests.conftest import SUBMIT_ACTION, bash_action
from tests.tasks.test_generators import _cache  # noqa: F401  (a private generator cache)
from tests.tasks.test_language_families import needs_toolchains

#: The families on the harness (the algorithms ones as they move onto it).
ALGORITHMS = [
    "glob-match",
    "edit-distance",
    "meeting-rooms",
    "build-order",
    "spreadsheet-eval",
    "range-queries-c",
]
MINE = [
    f.name
    for category in ("optimization", "data-querying", "software-engineering", "file-operations")
    for f in g.families(category)
] + ALGORITHMS


def _spec(tests: dict | Path) -> dict:
    blob = tests["harness.bin"] if isinstance(tests, dict) else tests.read_bytes()
    return marshal.loads(zlib.decompress(blob))


@pytest.mark.slow
@pytest.mark.parametrize("family", MINE)
def test_the_hidden_test_is_data(family: str):
    for difficulty in (0.1, 0.5, 0.9):
        tests = g.generate(family, 5, difficulty).tests
        assert "test_hidden.py" not in tests and "palaestra_harness.py" in tests
        assert "palaestra_harness.py" in tests["test.sh"]
        spec = _spec(tests)
        assert spec["answer"]["kind"] in hs.ANSWERS and spec["compare"]["how"] in hs.COMPARISONS
        assert spec["cases"] and all("want" in c for c in spec["cases"])
        assert ("palaestra_pg.py" in tests) == (spec["answer"]["kind"] == "postgres")


def test_a_reference_package_emits_its_expected_values_at_generation_time():
    """hs.emitted runs a call's code on the reference's files in a child, as the checker's
    child would run it on the agent's copy: INPUT in, emit's value out; a failing reference
    raises rather than fixing wrong expected values."""
    files = {"pkg/__init__.py": "", "pkg/mod.py": "def twice(x):\n    return [x, x]\n"}
    code = "import os\nfrom pkg.mod import twice\nemit([twice(v) + [os.getcwd() != ''] for v in INPUT])\n"
    assert hs.emitted(files, code, [1, "ü"]) == [[1, 1, True], ["ü", "ü", True]]
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        hs.emitted(files, "emit(1 / 0)", None)


def test_the_builder_refuses_what_the_harness_cannot_run():
    with pytest.raises(ValueError, match="comparison 'fuzzy'"):
        hs.compare("fuzzy")
    with pytest.raises(ValueError, match="answer kind 'shell'"):
        hs.tests(answer={"kind": "shell"}, cases=[], compare=hs.compare("equal"))
    with pytest.raises(ValueError, match="needs cases="):
        hs.python_calls(hs.python_call("emit([])", None), hs.python_call("emit([])", None))
    made = hs.made("inputs", "make", 1, [], "text")
    with pytest.raises(ValueError, match="need a reference"):
        hs.tests(
            answer=hs.program(["x"]), cases=[hs.Case("c", make=made)], compare=hs.compare("lines")
        )


@pytest.mark.parametrize(("family", "module"), [("shipment-reconcile", "bench_inputs"),
                                                ("key-totals-rust", "rust_inputs")])  # fmt: skip
def test_a_large_input_is_made_again_as_the_generator_made_it(family: str, module: str):
    tests = g.generate(family, 2, 0.9).tests
    (make,) = [c["make"] for c in _spec(tests)["cases"] if "make" in c]
    scope: dict = {}
    exec(tests[f"{module}.py"], scope)
    value = scope[make["fn"]](random.Random(make["seed"]), *make["args"])
    assert (
        hs.made(module, make["fn"], make["seed"], make["args"], value)["sha256"] == make["sha256"]
    )


def _with_stale_digest(source: Path, dest: Path) -> Path:
    """A copy of a task whose large input's digest is not what its input module makes."""
    import shutil

    shutil.copytree(source, dest)
    path = dest / "tests" / "harness.bin"
    spec = _spec(path)
    for case in spec["cases"]:
        if "make" in case:
            case["make"]["sha256"] = "0" * 64
            case["want"] = {"stdout": "", "files": {}}  # made for other data: not trusted
    path.write_bytes(zlib.compress(marshal.dumps(spec, 2), 6))
    return dest


@pytest.mark.slow
async def test_other_data_from_a_seed_runs_the_reference_first(tmp_path: Path):
    source = g.materialise("shipment-reconcile", 1, 0.1)
    task = load_task(_with_stale_digest(source, tmp_path / source.name))
    results = await check_tasks([task], only=["oracle", "nop"])
    assert {r.scenario: r.reward for r in results} == {"oracle": 1.0, "nop": 0.0}
    assert "the reference runs on it" in results[0].detail


#: A program that runs the reference's copy of itself where the checker left one.
RUN_THE_REFERENCE = textwrap.dedent(
    """\
    import glob, runpy, sys
    found = glob.glob("/tmp/ref-*/{name}") + glob.glob("/tmp/**/ref-*/{name}", recursive=True)
    if not found:
        sys.exit("no reference to run")
    runpy.run_path(found[0], run_name="__main__")
    """
)


async def test_a_reference_run_for_other_data_is_closed_to_the_agent(tmp_path: Path):
    source = g.materialise("shipment-reconcile", 1, 0.1)
    task = _with_stale_digest(source, tmp_path / source.name)
    ((program, _),) = _spec(task / "tests" / "harness.bin")["reference"]["files"].items()
    reward, output = await _reward(task, program, RUN_THE_REFERENCE.format(name=program))
    assert "the reference runs on it" in output
    assert reward == 0.0, output[-800:]


@pytest.mark.slow
@needs_toolchains
async def test_other_data_from_a_seed_runs_the_reference_function_first(tmp_path: Path):
    source = g.materialise("key-totals-rust", 1, 0.1)
    task = load_task(_with_stale_digest(source, tmp_path / source.name))
    results = await check_tasks([task], only=["oracle", "wrong:sorted-by-key"])
    assert [r.reward for r in results] == [1.0, 0.0], [r.detail[-500:] for r in results]


# -- the program's jail ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """log-split-io (easy): its program, and the reference's source."""
    task = write_generated("log-split-io", 0, 0.0, tmp_path_factory.mktemp("gen") / "split")
    ((program, source),) = _spec(task / "tests" / "harness.bin")["reference"]["files"].items()
    return task, program, source


async def _reward(task: Path, program: str, source: str) -> tuple[float | None, str]:
    command = f"cat > /app/{program} <<'EOF_PROGRAM'\n{source}\nEOF_PROGRAM"
    policy = ScriptedPolicy([bash_action(command), SUBMIT_ACTION])
    async with CodeEnv(TaskSet.from_dir(task), sandbox=LocalBackend()) as env:
        episode = await rollout(env, policy)
    return episode.reward, episode.end.verifier.output if episode.end.verifier else ""


#: Runs first: tries to empty, remove and replace the case's input (a later read would see it).
SPOIL_INPUTS = textwrap.dedent(
    """\
    import os as _os, sys as _sys
    _log = _sys.argv[1]
    for _try in (lambda: open(_log, "w").close(), lambda: _os.unlink(_log),
                 lambda: _os.rename(_log, _log + ".x"), lambda: _os.chmod(_log, 0o666)):
        try:
            _try()
        except OSError:
            pass
    """
)


def _after(body: str) -> str:
    """Runs after the program wrote its output directory (``sys.argv[2]``), on each file."""
    return (
        "\nimport os as _os, sys as _sys, tempfile as _tf\n"
        "for _name in sorted(_os.listdir(_sys.argv[2])):\n"
        "    victim = _os.path.join(_sys.argv[2], _name)\n"
        + textwrap.indent(textwrap.dedent(body), "    ")
    )


async def test_a_run_cannot_change_its_inputs(split):
    task, program, source = split
    reward, output = await _reward(task, program, SPOIL_INPUTS + source)
    assert reward == 1.0, output


#: Runs first: fails the run when an earlier case's directory (inputs, outputs, whatever an
#: earlier run left there) is open to it.
PEEK_AT_EARLIER_CASES = textwrap.dedent(
    """\
    import glob as _g, os as _os, sys as _sys
    _own = _os.path.dirname(_os.path.abspath(_sys.argv[1]))
    for _d in _g.glob("/tmp/case-*"):
        if _os.path.abspath(_d) != _own and _os.access(_d, _os.R_OK | _os.X_OK):
            _sys.exit("an earlier case's directory is open: " + _d)
    """
)


async def test_a_run_finds_earlier_cases_closed(split):
    task, program, source = split
    reward, output = await _reward(task, program, PEEK_AT_EARLIER_CASES + source)
    assert reward == 1.0, output


@pytest.mark.parametrize(
    "planted",
    [
        # the real output elsewhere, a link to it in its place
        """\
        keep = _os.path.join(_tf.mkdtemp(), "real")
        _os.rename(victim, keep)
        _os.symlink(keep, victim)
        """,
        # a FIFO in its place: opened for reading, it would block the checker
        """\
        _os.unlink(victim)
        _os.mkfifo(victim)
        """,
    ],
    ids=["link", "fifo"],
)
async def test_output_is_read_without_links(split, planted: str):
    task, program, source = split
    reward, output = await _reward(task, program, source + _after(planted))
    assert reward == 0.0, output
    assert "missing or unexpected" in output, output


# -- a Python answer in several calls ------------------------------------------------------------

#: The comparison of the second call: a function of a module the task ships in ``tests/``.
_WITHIN = textwrap.dedent(
    """\
    def within(ck, label, want, got, opts):
        ok = isinstance(got, int) and abs(got - want) <= opts["slack"]
        return ck.check(label, ok, "expected {} +- {}, got {!r}".format(want, opts["slack"], got))
    """
)
_SQ = "def sq(x):\n    {}\n    return x * x\n"


def _sq_task(tests: dict, wrongs: dict[str, str], dest: Path) -> Path:
    """A task of one family, written to ``dest``: ``sq.py``'s ``sq`` (the reference returns
    ``x * x``) checked by ``tests``, with these wrong versions of it."""
    from palaestra.tasks.generators.base import Family, write_task

    task = hs.task(
        instruction="sq",
        workspace={"sq.py": _SQ.format("raise NotImplementedError")},
        tests=tests,
        answer_path="sq.py",
        reference=_SQ.format("pass"),
        wrongs=wrongs,
        note="x * x",
    )
    fam = Family(f"{dest.name}-demo", "algorithms", "a harness test", lambda spec: task)
    return write_task(fam, fam.spec(0, 0.0), task, dest)


#: The third call's input, made again in the checker, and its reference.
_NUMBERS = textwrap.dedent(
    """\
    def numbers(rng, n):
        return [rng.randrange(100) for _ in range(n)]

    def squares(values, n):
        return [[v * v for v in values]]
    """
)


def _calls_task(tmp_path: Path) -> Path:

    code = "from sq import sq\nemit([sq(x) for x in INPUT])"
    scope: dict = {}
    exec(_NUMBERS, scope)
    numbers = scope["numbers"](random.Random(7), 50)
    tests = hs.tests(
        answer=hs.python_calls(
            hs.python_call(code, [1, 2, 3], cases=3),
            hs.python_call(
                code,
                [-4],
                cases=1,
                cpu=1,
                compare=hs.compare("function", module="near", fn="within", slack=1),
            ),
            hs.python_call(
                "from sq import sq\nemit([[sq(x) for x in INPUT]])",
                None,
                make=hs.made("numbers", "numbers", 7, [50], numbers),
                reference="squares",
            ),
            compile=["/app/sq.py"],
        ),
        cases=[hs.Case(f"sq({x})", want=x * x) for x in (1, 2, 3)]
        + [
            hs.Case("sq(-4)", want=15),
            hs.Case("50 made squares", want=scope["squares"](numbers, 50)[0]),
        ],
        compare=hs.compare("equal"),
        modules={"near.py": _WITHIN, "numbers.py": _NUMBERS},
    )
    wrongs = {
        "cube": _SQ.format("return x * x * x"),
        # right on the first call; the second call's own CPU bar stops it
        "slow-on-negatives": _SQ.format("while x < 0:\n        pass"),
    }
    return _sq_task(tests, wrongs, tmp_path / "calls")


async def test_python_calls_each_with_its_bar_and_comparison(tmp_path: Path):
    results = await check_tasks([load_task(_calls_task(tmp_path))])
    by = {r.scenario: r for r in results}
    assert {name: r.reward for name, r in by.items()} == {
        "oracle": 1.0,
        "nop": 0.0,
        "wrong:cube": 0.0,
        "wrong:slow-on-negatives": 0.0,
    }, [r.detail[-600:] for r in results]
    slow = by["wrong:slow-on-negatives"].detail
    assert "PASS sq(3)" in slow and "ERROR sq(-4)" in slow, slow[-800:]
    assert "FAIL sq(-4): expected 15 +- 1, got -64" in by["wrong:cube"].detail


async def test_a_made_call_input_of_other_data_runs_the_reference_first(tmp_path: Path):
    task = _calls_task(tmp_path)
    path = task / "tests" / "harness.bin"
    spec = _spec(path)
    spec["answer"]["calls"][2]["make"]["sha256"] = "0" * 64
    spec["cases"][-1]["want"] = [-1]  # made for other data: not trusted
    path.write_bytes(zlib.compress(marshal.dumps(spec, 2), 6))
    results = await check_tasks([load_task(task)], only=["oracle", "wrong:cube"])
    assert [r.reward for r in results] == [1.0, 0.0], [r.detail[-600:] for r in results]
    assert "the reference runs on it" in results[0].detail


# -- a partial-credit spec -----------------------------------------------------------------------


async def test_a_partial_credit_spec_rewards_the_fraction_of_checks(tmp_path: Path):
    """``reward="partial"``: an answer right on one case of three gets 1/3 (the default gives
    it 0), the reference 1, nothing 0; the builder refuses another reward."""

    def task_tests(reward: str) -> dict:
        return hs.tests(
            answer=hs.python_calls(
                hs.python_call("from sq import sq\nemit([sq(x) for x in INPUT])", [1, 2, 3]),
                compile=["/app/sq.py"],
            ),
            cases=[hs.Case(f"sq({x})", want=x * x) for x in (1, 2, 3)],
            compare=hs.compare("equal"),
            reward=reward,
        )

    rewards = {}
    for reward in ("partial", "all"):
        cube = {"cube": _SQ.format("return x * x * x")}
        results = await check_tasks(
            [load_task(_sq_task(task_tests(reward), cube, tmp_path / reward))]
        )
        rewards[reward] = {r.scenario: r.reward for r in results}
    assert rewards == {
        "partial": {"oracle": 1.0, "nop": 0.0, "wrong:cube": 0.3333},
        "all": {"oracle": 1.0, "nop": 0.0, "wrong:cube": 0.0},
    }
    with pytest.raises(ValueError, match="reward 'best'"):
        task_tests("best")


# -- a memory bar --------------------------------------------------------------------------------

#: The answer's function first spreads 150 MB over three forks (50 MB each, under the bar
#: alone), then answers right: or grows one list of 100 MB for an instant.
_HOGS = {
    "spread": textwrap.dedent(
        """\
        import os, time
        kids = []
        for _ in range(3):
            pid = os.fork()
            if pid == 0:
                block = b"x" * (50 << 20)
                time.sleep(5)  # killed at the first poll that sees it
                os._exit(0)
            kids.append(pid)
        for pid in kids:
            os.waitpid(pid, 0)"""
    ),
    "burst": 'block = b"x" * (100 << 20)\ndel block',
}


async def test_a_memory_bar_is_over_the_run_s_whole_tree(tmp_path: Path):
    """``hs.limits(memory_mb=64)``: the reference passes under it, the right answer reached
    by memory spread over forks (each under the bar) or held for an instant fails (docs/trust.md
    says how a tree's memory is measured)."""

    tests = hs.tests(
        answer=hs.python_calls(
            hs.python_call("from sq import sq\nemit([sq(x) for x in INPUT])", [1, 2, 3]),
            compile=["/app/sq.py"],
        ),
        cases=[hs.Case(f"sq({x})", want=x * x) for x in (1, 2, 3)],
        compare=hs.compare("equal"),
        limits=hs.limits(memory_mb=64),
    )
    wrongs = {
        name: _SQ.format(textwrap.indent(body, "    ").strip()) for name, body in _HOGS.items()
    }
    results = await check_tasks([load_task(_sq_task(tests, wrongs, tmp_path / "memory"))])
    got = {r.scenario: (r.reward, "memory limit of 64 MB exceeded" in r.detail) for r in results}
    assert got == {
        "oracle": (1.0, False),
        "nop": (0.0, False),
        "wrong:spread": (0.0, True),
        "wrong:burst": (0.0, True),
    }, [r.detail[-600:] for r in results]
