"""The synthesis pipeline on a tiny local git project: kept bugs become tasks whose reference
patch restores the original, whose instructions give nothing away, made again identically from
the manifest; a re-run redoes nothing; unusable projects are one clear error."""

from __future__ import annotations

import filecmp
import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from palaestra.cli import app
from palaestra.tasks import load_task
from palaestra.tasks.synth import SynthError
from palaestra.tasks.synth.manifest import Manifest, Materialised
from palaestra.tasks.synth.palaestra_synth_patch import apply as apply_patch
from palaestra.tasks.synth.pipeline import Options, synthesise
from tests.tasks.synth.project_fixture import CORE, make_project

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier

OPTIONS = Options(candidates=40, pairs=0.5, image=False)


@pytest.fixture(scope="module")
def synthesised(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Manifest]:
    root = make_project(tmp_path_factory.mktemp("src") / "tinycalc")
    out = tmp_path_factory.mktemp("out")
    lines: list[str] = []
    manifest = synthesise(str(root), out, OPTIONS, say=lines.append)
    assert any(line.startswith("baseline") for line in lines)
    return root, out, manifest


def test_kept_bugs_are_tasks_with_failing_tests(synthesised) -> None:
    _, out, manifest = synthesised
    stats = manifest.stats
    assert stats["reliable_tests"] == 15 and stats["flaky_tests"] == 0
    assert len(manifest.tasks) >= 10
    assert stats["kept"] == len(manifest.tasks)
    assert stats["candidates"] + stats["pairs_tried"] == len(manifest.tasks) + sum(
        stats["dropped"].values()
    )
    assert any(len(b.sites) == 2 for b in manifest.tasks)
    for bug in manifest.tasks:
        task = load_task(out / bug.id)
        assert bug.fail_to_pass and not set(bug.fail_to_pass) & set(bug.pass_to_pass)
        assert task.config.metadata["fail_to_pass"] == len(bug.fail_to_pass)
        assert task.config.metadata["sealed_system"] is True
        assert task.config.environment.network_mode == "no-network"
        checked = json.loads((out / bug.id / "tests" / "tests.json").read_text())
        assert checked["fail_to_pass"] == bug.fail_to_pass


def test_reference_restores_the_original_and_partial_fix_does_not(synthesised, tmp_path) -> None:
    _, out, manifest = synthesised
    for bug in manifest.tasks:
        work = tmp_path / bug.id
        shutil.copytree(out / bug.id / "environment", work)
        mutated = (work / "tinycalc" / "core.py").read_text()
        assert mutated != CORE
        apply_patch((out / bug.id / "solution" / "fix.patch").read_text(), work)
        assert (work / "tinycalc" / "core.py").read_text() == CORE
        partial = out / bug.id / "wrong_solutions" / "partial-fix" / "fix.patch"
        assert partial.is_file() == (len(bug.sites) == 2)
        if partial.is_file():
            shutil.rmtree(work)
            shutil.copytree(out / bug.id / "environment", work)
            apply_patch(partial.read_text(), work)
            assert (work / "tinycalc" / "core.py").read_text() not in (CORE, mutated)


def test_nothing_gives_the_answer_away(synthesised) -> None:
    _, out, manifest = synthesised
    for bug in manifest.tasks:
        task_dir = out / bug.id
        mutated = (task_dir / "environment" / "tinycalc" / "core.py").read_text()
        originals = [
            line for line in CORE.splitlines() if line.strip() and line not in mutated.splitlines()
        ]
        instruction = (task_dir / "instruction.md").read_text()
        assert "tinycalc/core.py" not in instruction and "tinycalc.core" not in instruction
        assert not any(line.strip() in instruction for line in originals if len(line.strip()) > 8)
        assert "cd /app && python -m pytest" in instruction
        env_files = {p.name for p in (task_dir / "environment").rglob("*")}
        assert not env_files & {".git", "__pycache__"} and not any(
            n.endswith(".pyc") for n in env_files
        )
        for path in (task_dir / "tests").rglob("*.py"):
            text = path.read_text()
            assert not any(line in text for line in originals if len(line.strip()) > 8), path


def test_a_rerun_redoes_nothing_and_the_manifest_makes_the_same_tasks(
    synthesised, tmp_path
) -> None:
    root, out, manifest = synthesised
    record = next((out / ".synth").iterdir()) / "candidates.jsonl"
    before = record.read_text()
    again = synthesise(str(root), out, OPTIONS, say=lambda _: None)
    assert record.read_text() == before
    assert [b.id for b in again.tasks] == [b.id for b in manifest.tasks]
    made = Materialised(Manifest.load(out / "manifest.json"), tmp_path, image=False)
    for bug in manifest.tasks[:5]:
        copy = made.task_dir(bug.id)
        diff = filecmp.dircmp(copy, out / bug.id)
        assert not diff.diff_files and not diff.left_only and not diff.right_only
        assert (copy / "instruction.md").read_text() == (
            out / bug.id / "instruction.md"
        ).read_text()
    assert [t.id for t in made.tasks()][:3] == [b.id for b in manifest.tasks[:3]]


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (dict(tests=False), "carries no tests"),
        (dict(native=True), "has C (or other native) extensions"),
    ],
)
def test_unusable_projects_are_one_line(tmp_path, make, says) -> None:
    root = make_project(tmp_path / "p", **make)
    with pytest.raises(SynthError, match=re.escape(says)):
        synthesise(str(root), tmp_path / "out", OPTIONS, say=lambda _: None)
    res = CliRunner().invoke(app, ["tasks", "synth", str(root), "-o", str(tmp_path / "o2")])
    assert res.exit_code == 2
    error = [line for line in res.output.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and says in error[0] and "Fix:" in error[0]
    assert "Traceback" not in res.output


def test_bad_source_names_are_one_line(tmp_path) -> None:
    for source in ("not a name!", str(tmp_path)):
        res = CliRunner().invoke(app, ["tasks", "synth", source, "-o", str(tmp_path / "o")])
        assert res.exit_code == 2 and "Fix:" in res.output and "Traceback" not in res.output
