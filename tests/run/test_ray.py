"""Episodes on a real Ray cluster: a head node and a second node (``ray start`` twice, one
cluster for the module), the driver connected once. Evaluations record every episode once,
also when an actor is killed mid-run; the RL stream yields groups from the cluster."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from palaestra.cli import app
from palaestra.env.registry import load_tasks
from palaestra.env.types import EpisodeStatus
from palaestra.rl.stream import RolloutStream
from palaestra.run.evaluate import evaluate
from palaestra.run.ray_executor import ACTOR_PREFIX, RayExecutor, RayOptions
from palaestra.run.store import read_episodes
from tests.procs import bwrap_pids, eventually
from tests.run.ray_cluster import ExtraNode, LocalCluster, add_node, start_cluster

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier

ray = pytest.importorskip("ray", reason="ray (the dev extra) not installed")
SRC = Path(__file__).resolve().parents[2] / "src"
TASKS = "starter:9:12"  # file operations: no timing in their tests


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    started = start_cluster(SRC)
    try:
        ray.init(address=started.address, log_to_driver=False, logging_level="error")
        try:
            yield started
        finally:
            ray.shutdown()
    finally:
        started.stop()
    assert started.pids() == [], "a process of the test cluster outlived it"
    assert not started.root.exists(), "the test cluster left its directory"


def _runs_a_sandbox(node: ExtraNode) -> bool:
    """Whether a bwrap sandbox runs under ``node`` (one of its actor's episodes is in flight)."""
    for pid in node.pids():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if Path(f.read().split(b"\0")[0].decode()).name == "bwrap":
                    return True
        except OSError:
            continue
    return False


def _once(run_dir: Path) -> list[tuple[str, int]]:
    """The (task, attempt) of every stored try, after checking none is stored twice."""
    rows = read_episodes(run_dir, final_only=False)
    keys = [(r["task_id"], r["attempt"]) for r in rows]
    assert len(keys) == len(set(keys)), keys
    return sorted(keys)


async def test_an_eval_over_the_cluster_records_each_episode_once(cluster, tmp_path):
    executor = RayExecutor(
        "starter:0:1", "nop", RayOptions(), concurrency=2, env_overrides={"sandbox": "local"}
    )
    await executor.start()
    try:  # one actor per node, the second node's included
        assert len(set(await executor.nodes())) == 2
    finally:
        await executor.aclose()
    # a custom resource places every actor on the node that has it
    node2 = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and "node2" in n["Resources"])
    placed = RayExecutor(
        "starter:0:1",
        "nop",
        RayOptions(actors=2, resources={"node2": 0.5}),
        concurrency=2,
        env_overrides={"sandbox": "local"},
    )
    await placed.start()
    try:
        assert await placed.nodes() == [node2, node2]
    finally:
        await placed.aclose()
    for policy, passed in (("oracle", 3), ("nop", 0)):
        out = tmp_path / policy
        summary = await evaluate(TASKS, policy, executor="ray", concurrency=4, out_dir=out)
        assert (summary["episodes"], summary["passed"], summary["errors"]) == (3, passed, 0)
        assert summary["executor"] == "ray"
        assert _once(out) == sorted((task.id, 0) for task in load_tasks(TASKS))
    # a resumed run skips what is done, as on one machine
    again = await evaluate(
        TASKS, "oracle", executor="ray", concurrency=4, out_dir=tmp_path / "oracle"
    )
    assert (again["skipped"], again["episodes"], again["passed"]) == (3, 3, 3)


async def test_an_actor_killed_mid_run_loses_only_its_episodes(cluster, tmp_path):
    killed: list[str] = []

    def kill_one(record: dict) -> None:
        if not killed:  # at the first stored episode, others are in flight on every actor
            actor = next(
                a
                for a in ray.util.list_named_actors(all_namespaces=True)
                if a["name"].startswith(ACTOR_PREFIX)
            )
            ray.kill(ray.get_actor(actor["name"], actor["namespace"]), no_restart=False)
            killed.append(actor["name"])

    # One actor holds every slot, so at the first stored episode the one killed has the others
    # in flight (with several, the first one listed may have finished its share).
    summary = await evaluate(
        TASKS,
        "nop",
        attempts=2,
        executor=RayOptions(actors=1),
        concurrency=4,
        out_dir=tmp_path,
        on_episode=kill_one,
    )
    assert killed and summary["lost"] >= 1  # the kill cut episodes short
    assert (summary["episodes"], summary["passed"], summary["errors"]) == (6, 0, 0)
    assert _once(tmp_path) == sorted((t.id, a) for t in load_tasks(TASKS) for a in (0, 1))
    # the restarted actor's janitor reclaimed what its killed incarnation left on the node (at
    # its start, or at a later pass if that incarnation was still exiting then)
    assert await eventually(lambda: not bwrap_pids(str(cluster.state_dir)), within=20)
    assert await eventually(lambda: not any(cluster.state_dir.glob("*/sb-*")), within=30)


async def test_a_node_killed_mid_run_loses_only_its_episodes(cluster, tmp_path):
    """A third node dies (SIGKILL of its raylet, workers and sandboxes) while an episode runs
    in a sandbox there: its in-flight episodes are retried on the live nodes, each recorded
    once. The machine comes back as a node at once; the first actor there reclaims what the
    dead node left."""
    node = add_node(cluster, SRC, "node3")
    assert await eventually(lambda: sum(n["Alive"] for n in ray.nodes()) == 3, within=60)
    killed: list[str] = []

    async def kill_node_when_busy() -> None:
        # Not at the first stored episode: node3's actor, on a node with no worker yet, may
        # not have started by then, and episodes queued at an actor that is not running yet
        # follow its restart elsewhere without being lost.
        while True:  # the scan of /proc blocks: off the loop
            if await asyncio.to_thread(_runs_a_sandbox, node):
                break
            await asyncio.sleep(0.02)
        killed.append("killing")  # from here on it runs to its end
        await asyncio.to_thread(node.kill)
        killed.append("killed")
        # Its actor's restart needs a node with 1.5 free CPUs: without one, an episode sent
        # to it before its death was noticed would wait for it forever.
        await asyncio.to_thread(add_node, cluster, SRC, "node3-back")

    # One actor per node (each reserves more than half a node's CPUs; SPREAD alone is
    # best-effort placement), two episodes in flight on each.
    options = RayOptions(actors=3, num_cpus=1.5)
    killer = asyncio.ensure_future(kill_node_when_busy())
    try:
        summary = await evaluate(
            TASKS, "nop", attempts=3, executor=options, concurrency=6, out_dir=tmp_path
        )
    finally:
        if not killed:  # no episode ran on node3: the assertion below says so
            killer.cancel()
            await asyncio.gather(killer, return_exceptions=True)
    if killed:
        await killer  # node3-back has started (or its failure is raised here)
    assert killed == ["killing", "killed"] and summary["lost"] >= 1, summary
    assert (summary["episodes"], summary["passed"], summary["errors"]) == (9, 0, 0)
    assert _once(tmp_path) == sorted((t.id, a) for t in load_tasks(TASKS) for a in range(3))
    assert await eventually(lambda: sum(n["Alive"] for n in ray.nodes()) == 3, within=120)
    # The dead node's sandboxes stay in the state dir until an actor starts on this machine:
    # node3's actor, restarted on node3-back, may already have; else the first actor there
    # reclaims them at its start.
    back = RayExecutor(
        TASKS,
        "nop",
        RayOptions(actors=1, resources={"node3-back": 0.5}),
        concurrency=1,
        env_overrides={"sandbox": "local"},
    )
    await back.start()
    try:
        await back.nodes()
        assert await eventually(lambda: not any(cluster.state_dir.glob("*/sb-*")), within=30)
    finally:
        await back.aclose()


async def test_episodes_sent_to_an_actor_that_never_starts_go_to_the_others(cluster, tmp_path):
    """Three actors asked for, room for two (each takes 0.4 of node2's one unit): the third
    never starts. The episode sent to it goes to the two that answer once it has been silent
    for ``unavailable_after_s``, instead of waiting for it forever; each is recorded once."""
    options = RayOptions(actors=3, resources={"node2": 0.4}, unavailable_after_s=3)
    running = evaluate(TASKS, "nop", attempts=2, executor=options, concurrency=3, out_dir=tmp_path)
    summary = await asyncio.wait_for(running, 300)
    assert summary["lost"] >= 1, summary
    assert (summary["episodes"], summary["passed"], summary["errors"]) == (6, 0, 0)
    assert _once(tmp_path) == sorted((t.id, a) for t in load_tasks(TASKS) for a in (0, 1))
    assert await eventually(
        lambda: (
            not [
                a
                for a in ray.util.list_named_actors(all_namespaces=True)
                if a["name"].startswith(ACTOR_PREFIX)
            ]
        ),
        within=30,
    ), "an actor outlived its run"


async def test_a_stream_on_the_cluster_yields_groups(cluster):
    async with RolloutStream(TASKS, "oracle", executor="ray", concurrency=4) as stream:
        groups = [group async for group in stream.groups(2, draws=2)]
    assert len(groups) == 2
    for group in groups:
        assert group.rewards == [1.0, 1.0]
        assert {e.status for e in group.episodes} == {EpisodeStatus.PASSED}
        assert len({e.task_id for e in group.episodes}) == 1
        assert len({e.episode_id for e in group.episodes}) == 2


def test_the_command_line_runs_on_the_cluster(cluster, tmp_path):
    """``--ray`` alone joins the cluster this machine is part of (``auto``); a scaffold with
    options (``--step-limit``) travels to the actors."""
    out = tmp_path / "run"
    res = CliRunner().invoke(
        app,
        [
            "eval",
            "starter:9:11",
            "-p",
            "oracle",
            "--ray",
            "--step-limit",
            "7",
            "--out",
            str(out),
            "--json",
        ],
        env={"RAY_ADDRESS": cluster.address},
    )
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout[res.stdout.index("{") :])
    assert (summary["executor"], summary["episodes"], summary["passed"]) == ("ray", 2, 2)


def test_bad_ray_resources_are_one_clear_line():
    res = CliRunner().invoke(
        app,
        ["eval", "starter:0:1", "--ray", "--ray-resources", "{docker: 1}"],
        env={"COLUMNS": "300"},
    )
    assert res.exit_code == 2
    assert "is not a JSON object of numbers" in res.output and "Traceback" not in res.output
