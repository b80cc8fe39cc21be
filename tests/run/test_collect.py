"""Harbor's collection on a real run: the collect hooks run before the verifier, and the
artifacts are kept in the run directory with Harbor's layout and manifest."""

from __future__ import annotations

import json

from palaestra.env import CodeEnv
from palaestra.llm import ScriptedPolicy
from palaestra.run import evaluate, rollout
from palaestra.run.store import read_episodes
from palaestra.scaffolds import OraclePolicy
from palaestra.tasks import load_task
from tests.conftest import SUBMIT_ACTION, bash_action
from tests.env.test_harbor_modes import multi_step_task

ARTIFACTS = """\
artifacts = [
  "answer.txt",
  { source = "/app/data", destination = "kept/data", exclude = ["*.tmp"] },
  "/app/link.txt",
  "/missing",
  { source = "/app/data/a.txt", destination = "kept/data/a.txt" },
]
"""
HOOKS = """
[[verifier.collect]]
command = "cat /app/answer.txt > /logs/artifacts/snapshot.txt"

[[verifier.collect]]
command = "echo failing; exit 3"
"""
#: Passes only when the first hook's snapshot is there: the hooks ran before the tests.
TEST_SH = """\
if [ "$(cat /logs/artifacts/snapshot.txt 2>/dev/null)" = "42" ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""
AGENT = (
    "echo 42 > /app/answer.txt && mkdir /app/data && echo a > /app/data/a.txt && echo b > /app/data/b.tmp"
    " && ln -s /etc/passwd /app/link.txt"
)


async def test_hooks_run_before_the_verifier_and_artifacts_are_kept(tmp_path, make_task):
    path = make_task("collects", test_sh=TEST_SH, extra_toml=HOOKS)
    (path / "task.toml").write_text(ARTIFACTS + (path / "task.toml").read_text())
    policy = ScriptedPolicy([bash_action(AGENT), SUBMIT_ACTION])
    run_dir = tmp_path / "run"
    summary = await evaluate(str(path), policy, out_dir=run_dir)
    assert summary["passed"] == 1, summary  # the tests saw the hook's snapshot
    (episode,) = read_episodes(run_dir)
    kept = run_dir / "episodes" / episode["episode_id"]
    artifacts = kept / "artifacts"
    assert (artifacts / "logs" / "artifacts" / "snapshot.txt").read_text() == "42\n"
    assert (artifacts / "app" / "answer.txt").read_text() == "42\n"
    assert sorted(p.name for p in (artifacts / "kept" / "data").iterdir()) == ["a.txt"]
    assert not (artifacts / "app" / "link.txt").exists()  # a link is not followed out
    manifest = json.loads((artifacts / "manifest.json").read_text())
    assert [(m["source"], m["destination"], m["type"], m["status"]) for m in manifest] == [
        ("/logs/artifacts", "artifacts/logs/artifacts", "directory", "ok"),
        ("/app/answer.txt", "artifacts/app/answer.txt", "file", "ok"),
        ("/app/data", "artifacts/kept/data", "directory", "ok"),
        ("/app/link.txt", "artifacts/app/link.txt", "file", "failed"),
        ("/missing", "artifacts/missing", "file", "failed"),
        ("/app/data/a.txt", "artifacts/kept/data/a.txt", "file", "skipped"),  # inside kept/data
    ]
    assert manifest[2]["exclude"] == ["*.tmp"]
    hooks = json.loads((kept / "hooks.json").read_text())
    assert [(h["exit_code"], h["timed_out"]) for h in hooks] == [(0, False), (3, False)]
    assert hooks[1]["output"].strip() == "failing"  # recorded; the episode went on


async def test_nothing_is_kept_when_nothing_is_collected(tmp_path, make_task):
    summary = await evaluate(str(make_task()), "oracle", out_dir=tmp_path)
    assert summary["passed"] == 1
    assert not (tmp_path / "episodes").exists()


STEP_TOML = """\
[agent]
timeout_sec = 600.0

[[steps]]
name = "write"
min_reward = 1.0
artifacts = ["answer.txt"]

[[steps.verifier.collect]]
command = "cp /app/answer.txt /logs/artifacts/after-write.txt"

[[steps]]
name = "extend"
"""


async def test_each_step_keeps_its_own_collection(tmp_path):
    task = multi_step_task(tmp_path)
    (task.path / "task.toml").write_text(STEP_TOML)
    task = load_task(task.path)
    async with CodeEnv([task], artifacts_dir=tmp_path / "kept") as env:
        episode = await rollout(env, OraclePolicy.from_tasks([task]))
    assert episode.reward == 1.0, episode.end
    steps = tmp_path / "kept" / episode.episode_id / "steps"
    write, extend = steps / "write" / "artifacts", steps / "extend" / "artifacts"
    assert (write / "app" / "answer.txt").read_text() == "42\n"  # the step's own artifact
    assert (write / "logs" / "artifacts" / "after-write.txt").read_text() == "42\n"  # its hook
    assert json.loads((steps / "write" / "hooks.json").read_text())[0]["exit_code"] == 0
    # the next step: the task's artifacts only (/logs/artifacts still holds the snapshot)
    assert not (extend / "app").exists() and not (steps / "extend" / "hooks.json").exists()
    assert (extend / "logs" / "artifacts" / "after-write.txt").is_file()
