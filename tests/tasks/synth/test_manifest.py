"""Shipped manifests: ``swe-synth/<project>`` lists its tasks without fetching anything, each
entry names real sites and tests; an unknown project is one clear line."""

from __future__ import annotations

import re

import pytest

from palaestra.env.registry import load_tasks
from palaestra.tasks.synth import manifest
from palaestra.tasks.synth.mutators import BY_NAME

_SITE = re.compile(r"^[\w./-]+\.py:([a-z-]+):\d+$")


@pytest.mark.parametrize("project", manifest.shipped())
def test_a_shipped_manifest_lists_valid_tasks_lazily(project, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PALAESTRA_CACHE_DIR", str(tmp_path))
    shipped = manifest.shipped_manifest(project)
    assert shipped.source == "pypi" and len(shipped.sdist_sha256) == 64
    assert any(p.startswith("pytest==") for p in shipped.packages)
    tasks = load_tasks(f"swe-synth/{project}:0:50")
    assert tasks.is_lazy and tasks.ids == [b.id for b in shipped.tasks[:50]]
    assert not any(tmp_path.iterdir()), "listing tasks fetched or wrote something"
    assert len({b.id for b in shipped.tasks}) == len(shipped.tasks)
    for bug in shipped.tasks:
        assert 1 <= len(bug.sites) <= 2 and bug.fail_to_pass
        for key in bug.sites:
            match = _SITE.match(key)
            assert match and match.group(1) in BY_NAME, key
        assert not set(bug.fail_to_pass) & set(bug.pass_to_pass)


def test_shipped_manifests_reach_many_tasks() -> None:
    total = sum(len(manifest.shipped_manifest(p).tasks) for p in manifest.shipped())
    assert total >= 1000 and len(manifest.shipped()) >= 20


def test_an_unknown_project_is_one_line() -> None:
    with pytest.raises(KeyError, match="no synthesised tasks of 'nope'; shipped: "):
        load_tasks("swe-synth/nope")
