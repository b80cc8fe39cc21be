"""No built-in task hands the agent its answer: no git history (where an answer could have been
committed and reverted) in any workspace, and nothing of the hidden tests in it."""

from __future__ import annotations

import pytest

from palaestra.tasks.generators import families
from tests.tasks.starter.pack import TASK_DIRS


@pytest.mark.slow
@pytest.mark.parametrize("family", [f.name for f in families()])
def test_generated_workspaces_hold_no_history_nor_tests(family: str) -> None:
    fam = next(f for f in families() if f.name == family)
    for difficulty in (0.0, 1.0):
        task = fam.generate(0, difficulty)
        vcs = [p for p in task.workspace if {".git", ".hg", ".svn"} & set(p.split("/"))]
        assert not vcs, vcs
        hidden = {str(v) for k, v in task.tests.items() if k != "test.sh" and len(str(v)) > 200}
        assert not hidden & {str(v) for v in task.workspace.values()}


def test_starter_environments_hold_no_history() -> None:
    for task in TASK_DIRS:
        found = [p for p in (task / "environment").rglob("*") if p.name in {".git", ".hg", ".svn"}]
        assert not found, found
