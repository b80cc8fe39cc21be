"""``palaestra tasks ...`` end to end: families, list, show, export, check."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from palaestra.cli import app
from palaestra.tasks import generators as g
from palaestra.tasks import load_task

runner = CliRunner()


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PALAESTRA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_families_lists_every_family_with_its_category():
    res = invoke("tasks", "families")
    assert res.exit_code == 0
    for fam in g.families():
        assert fam.name in res.output and fam.category in res.output


def test_list_does_not_generate_and_shows_tiers(tmp_path: Path):
    fam = g.families()[0].name
    res = invoke("tasks", "list", f"gen/{fam}", "--limit", "3")
    assert res.exit_code == 0, res.output
    assert f"{fam}-d000-s0" in res.output and "easy" in res.output and "hard" in res.output
    assert not (tmp_path / "cache").exists(), "listing a generated pack must not generate it"


def test_show_a_generated_task_id():
    fam = g.families()[0]
    res = invoke("tasks", "show", f"{fam.name}-d050-s3")
    assert res.exit_code == 0, res.output
    assert "medium" in res.output and fam.category in res.output
    assert g.generate(fam.name, 3, 0.5).instruction.splitlines()[0] in res.output


def test_show_refuses_a_selection_of_many():
    res = runner.invoke(app, ["tasks", "show", "starter"])
    assert res.exit_code != 0 and "selects 18 tasks" in res.output


@pytest.mark.slow
def test_export_round_trips_and_refuses_to_overwrite(tmp_path: Path):
    fam = g.families()[0].name
    out = tmp_path / "out"
    res = invoke("tasks", "export", f"gen/{fam}", "--limit", "3", "--out", str(out))
    assert res.exit_code == 0, res.output
    dirs = sorted(p.name for p in out.iterdir())
    assert len(dirs) == 3
    for name in dirs:
        task = load_task(out / name)
        family, seed, difficulty = g.parse_task_id(name)
        assert task.config.metadata["seed"] == seed
        assert task.instruction.strip() == g.generate(family, seed, difficulty).instruction.strip()
    again = runner.invoke(app, ["tasks", "export", f"gen/{fam}", "-n", "1", "-o", str(out)])
    assert again.exit_code != 0 and "--force" in again.output


def test_check_passes_a_sound_task_and_fails_a_gameable_one(tmp_path: Path, make_task):
    fam = g.families()[0].name
    sound = g.write(fam, 1, 0.1, tmp_path / "sound")
    res = invoke("tasks", "check", str(sound), "-j", "2", "--verbose")
    assert res.exit_code == 0, res.output
    assert "oracle" in res.output and "nop" in res.output and "scenarios as expected" in res.output

    # a verifier that passes everything: nop gets reward 1, check must say so and exit 1
    gameable = make_task("always-passes", test_sh="echo 1 > /logs/verifier/reward.txt\n")
    res = runner.invoke(app, ["tasks", "check", str(gameable)])
    assert res.exit_code == 1
    assert "WRONG" in res.output and "1/2 scenarios as expected" in res.output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("tasks", "list", "starter:99"), "index 99 is out of range: 'starter' has 18 tasks"),
        (("tasks", "list", "gen/no-such-family"), "no generator family 'no-such-family'"),
        (("tasks", "show", "starter:99"), "index 99 is out of range"),
        (("tasks", "show", "no-such-task"), "no environment or task 'no-such-task'"),
        (("tasks", "show", "strater"), "did you mean starter?"),
        (("eval", "starter:0", "-p", "oracl"), "unknown policy 'oracl'"),
        (("tasks", "show", "edit-distanc-d050-s1"), "did you mean edit-distance?"),
        (("tasks", "show", "/no/such/dir"), "no directory '/no/such/dir'"),
        (
            ("tasks", "show", "algorithms-easy-merge-interval"),
            "did you mean algorithms-easy-merge-intervals?",
        ),
        (("eval", "starter:0", "-j", "0"), "Invalid value for '--concurrency' / '-j'"),
        (("eval", "starter:0", "-j", "many"), "Invalid value for '--concurrency' / '-j'"),
        (("eval", "starter:0", "--ray", "--ray-resources", "[1]"), "not a JSON object"),
        (("eval", "starter:0", "--ray", "--prepare-ahead"), "drop --prepare-ahead or --ray"),
        (("eval", "starter:0", "--scaffold", "external"), "needs the command of your agent"),
        (("eval", "starter:0", "--no-such-option"), "No such option: --no-such-option"),
        (("tasks", "show", "edit-distance-d150-s1"), "difficulty must be a number in [0, 1]"),
        (("tasks", "export", "starter:5:2", "-o", "out"), "slice :5:2 of 'starter'"),
        (("tasks", "check", "starter@4/2"), "shard @4/2 is invalid"),
        (("tasks", "families", "--category", "nope"), "unknown category 'nope'"),
        (("eval", "starter:0", "--policy", "bogus"), "unknown policy 'bogus'; choose one of"),
        (("eval", "edit-distance-d150-s1"), "difficulty must be a number in [0, 1]"),
        (("eval", "starter:0", "--sandbox", "bogus"), "unknown sandbox backend 'bogus'"),
        (("eval", "starter:0", "--scaffold", "bogus"), "unknown scaffold 'bogus'"),
        (("proxy", "--policy", "bogus"), "unknown policy 'bogus'"),
    ],
)
def test_ordinary_mistakes_get_one_line_and_exit_2(args: tuple[str, ...], says: str):
    """Every subcommand turns a wrong id, selector, difficulty, policy or option value into one
    line naming it (exit code 2), never a traceback: ``catch_exceptions=False`` lets one
    through."""
    res = invoke(*args)
    assert res.exit_code == 2, res.output
    assert res.output.startswith("error: ") and len(res.output.splitlines()) == 1, res.output
    assert says in res.output, res.output
    assert "Traceback" not in res.output
