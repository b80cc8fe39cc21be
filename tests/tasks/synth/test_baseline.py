"""The synthesis baseline: a test module that cannot be collected (it imports what the
project's venv lacks) is left out, and the rest of the suite still counts as reliable."""

from __future__ import annotations

import sys
from pathlib import Path

from palaestra.tasks.synth.environment import ProjectVenv
from palaestra.tasks.synth.project import Project
from palaestra.tasks.synth.testrun import baseline
from tests.tasks.synth.project_fixture import make_project


def test_a_module_that_cannot_be_collected_leaves_the_rest_reliable(tmp_path: Path) -> None:
    root = make_project(tmp_path / "tinycalc")
    (root / "tests" / "test_properties.py").write_text(
        "import hypothesis_is_not_installed\n\n\ndef test_never():\n    pass\n"
    )
    project = Project(
        name="tinycalc",
        version="1.0",
        root=root,
        import_root="",
        library=("tinycalc/__init__.py", "tinycalc/core.py"),
        tests=("tests/test_core.py", "tests/test_properties.py"),
    )
    # the test runner's own interpreter has pytest: it stands in for the project's venv
    venv = ProjectVenv(venv=Path(sys.executable).parent.parent, packages=())
    work = tmp_path / "work"
    work.mkdir()
    record = baseline(venv, project, root, work)
    assert record.files == ["tests/test_core.py"]
    assert record.reliable and all(n.startswith("tests/test_core.py::") for n in record.reliable)
    assert record.flaky == []
