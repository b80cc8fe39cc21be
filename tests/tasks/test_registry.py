"""Harbor registries, fetched by sparse git checkout from a local git repository (no git host is
reachable here; the code path is the same for https URLs)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from palaestra.cli import app
from palaestra.env.registry import load_tasks, make
from palaestra.run.rollout import rollout
from palaestra.scaffolds import OraclePolicy
from palaestra.tasks.datasets import registry as reg
from palaestra.tasks.source import SkippedTasksWarning

GIT = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]


def git(repo: Path, *args: str) -> str:
    out = subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True, text=True)
    return out.stdout.strip()


@pytest.fixture
def setup(tmp_path: Path, make_task, monkeypatch: pytest.MonkeyPatch):
    """A repository holding two tasks (and unrelated files) over two commits, and a registry."""
    monkeypatch.setenv("PALAESTRA_CACHE_DIR", str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for name in ("task-a", "task-b"):
        make_task(name, root=repo / "datasets" / "mini")
    (repo / "big").mkdir()
    (repo / "big" / "blob.bin").write_bytes(b"x" * 100_000)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "v1")
    v1 = git(repo, "rev-parse", "HEAD")
    instruction = repo / "datasets" / "mini" / "task-a" / "instruction.md"
    instruction.write_text("CHANGED AFTER v1\n")
    git(repo, "commit", "-qam", "v2")
    url = f"file://{repo}"
    registry = [
        {
            "name": "mini",
            "version": "1.0",
            "description": "two tasks",
            "tasks": [
                {"name": n, "git_url": url, "git_commit_id": v1, "path": f"datasets/mini/{n}"}
                for n in ("task-a", "task-b")
            ],
            "metrics": [{"type": "mean"}],
        },
        {
            "name": "mini",
            "version": "head",
            "tasks": [{"name": "task-a", "git_url": url, "path": "datasets/mini/task-a"}],
        },
    ]
    path = tmp_path / "registry.json"
    path.write_text(json.dumps(registry))
    return path, repo, v1


def test_fetch_is_sparse_pinned_cached_and_loads_offline(setup, tmp_path: Path):
    path, repo, v1 = setup
    res = CliRunner().invoke(app, ["tasks", "fetch", "mini@1.0", "--registry", str(path)])
    assert res.exit_code == 0, res.output
    assert "harbor/mini@1.0" in res.output
    tasks = load_tasks("harbor/mini@1.0")
    assert tasks.ids == ["task-a", "task-b"]
    assert "CHANGED" not in tasks.get("task-a").instruction, "pinned to the registry's commit"
    checkout = next((tmp_path / "cache" / "harbor" / ".repos").glob("*/*"))
    assert not (checkout / "big").exists(), "only the tasks' paths are checked out"
    manifest = json.loads((reg.dataset_dir("mini@1.0") / "manifest.json").read_text())
    assert manifest["sources"]["task-a"].endswith(f"@{v1}:datasets/mini/task-a")

    shutil.rmtree(repo)  # the cache serves it from now on: no network, no git host
    again = CliRunner().invoke(app, ["tasks", "fetch", "mini@1.0", "--registry", str(path)])
    assert again.exit_code == 0, again.output
    assert load_tasks("harbor/mini@1.0:1").ids == ["task-b"]


async def test_fetched_dataset_runs_an_episode(setup):
    path, _, _ = setup
    datasets, base = reg.read_registry(path)
    await reg.fetch(reg.find_dataset(datasets, "mini@head"), base)
    async with make("harbor/mini@head") as env:
        episode = await rollout(env, OraclePolicy.from_tasks(env.tasks), seed=0)
    assert episode.reward == 1.0 and episode.info["task_id"] == "task-a"
    assert "CHANGED" in env.tasks.get("task-a").instruction, "no commit: the default branch"


async def test_an_invalid_task_of_a_fetched_dataset_is_skipped_and_listed(setup):
    path, _, _ = setup
    datasets, base = reg.read_registry(path)
    dest = await reg.fetch(reg.find_dataset(datasets, "mini@1.0"), base)
    (dest / "task-b" / "task.toml").write_text("[agent]\ntimeout_sec = -1\n")
    with pytest.warns(
        SkippedTasksWarning, match=r"skipped 1 of 2 tasks that do not load \(task-b\)"
    ):
        tasks = load_tasks("harbor/mini@1.0")
    assert tasks.ids == ["task-a"]
    assert [(d.name, "timeout_sec" in str(e)) for d, e in tasks.invalid] == [("task-b", True)]
    with pytest.warns(SkippedTasksWarning):
        selected = load_tasks("harbor/mini@1.0:0")
    assert [d.name for d, _ in selected.invalid] == ["task-b"], "selections keep the list"


def test_clear_errors(setup, tmp_path: Path):
    path, _, _ = setup
    datasets, _ = reg.read_registry(path)
    with pytest.raises(reg.RegistryError, match="has versions 1.0, head; name one"):
        reg.find_dataset(datasets, "mini")
    with pytest.raises(reg.RegistryError, match="no dataset 'maxi'.*mini@1.0"):
        reg.find_dataset(datasets, "maxi")
    with pytest.raises(reg.RegistryError, match="not fetched. Fix: palaestra tasks fetch"):
        load_tasks("harbor/mini@1.0")
    broken = tmp_path / "broken.json"
    broken.write_text('[{"name": "x", "version": "1", "tasks": [{"name": "t"}]}]')
    with pytest.raises(reg.RegistryError, match=r"tasks\.0\.path: Field required"):
        reg.read_registry(broken)
    res = CliRunner().invoke(app, ["tasks", "fetch", "nope", "--registry", str(path)])
    assert res.exit_code == 2 and "no dataset 'nope'" in res.output
