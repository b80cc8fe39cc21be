"""The pipeline on a real project from PyPI (its sdist downloaded: needs PyPI, which CI has):
a few candidate bugs in inflection 0.5.1 become tasks, the manifest pins the sdist by hash."""

from __future__ import annotations

from pathlib import Path

import pytest

from palaestra.tasks import load_task
from palaestra.tasks.synth.pipeline import Options, synthesise
from palaestra.tasks.synth.project import sha256

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier


def test_a_real_sdist_becomes_tasks(tmp_path: Path) -> None:
    manifest = synthesise(
        "inflection==0.5.1",
        tmp_path,
        Options(candidates=8, pairs=0, image=False),
        say=lambda _: None,
    )
    assert (manifest.project, manifest.version, manifest.source) == ("inflection", "0.5.1", "pypi")
    (sdist,) = (tmp_path / ".synth").glob("*/sdist/inflection-0.5.1.tar.gz")
    assert manifest.sdist_sha256 == sha256(sdist)
    assert manifest.stats["reliable_tests"] > 400
    assert len(manifest.tasks) >= 4
    assert manifest.stats["kept"] + sum(manifest.stats["dropped"].values()) == 8
    assert any(p.startswith("pytest==") for p in manifest.packages)
    assert not any(p.lower().startswith("inflection==") for p in manifest.packages)
    for bug in manifest.tasks:
        task = load_task(tmp_path / bug.id)
        assert "python -m pytest 'test_inflection.py::" in task.instruction
        assert "inflection/__init__.py" not in task.instruction
