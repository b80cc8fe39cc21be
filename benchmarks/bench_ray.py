"""Episodes on a Ray cluster against episodes in this process, on the same work.

Prints figures; asserts nothing. Needs ``palaestra[ray]`` and a running cluster of two nodes,
e.g. on one machine::

    ray start --head --num-cpus 2 --include-dashboard=false
    ray start --address=<the address it printed> --num-cpus 2 --temp-dir /tmp/ray-node2
    python benchmarks/bench_ray.py --address auto
    ray stop

The work: ``--episodes`` generated tasks of one family (``gen/<family>:0:N``), each run once by
the instant ``nop`` policy (as in ``bench_stream.py``: a sandbox start, one turn, the verifier
and the teardown, so the figure is the framework's, not a model's), through the executor
contract alone (no store), after a warm-up round that starts every actor, its backend and its
policy:

* ``local``: :class:`~palaestra.run.executor.LocalExecutor` in this process;
* ``ray, 1 node``: one actor holding every slot;
* ``ray, 2 nodes``: two actors (``SPREAD``: one per node), the slots shared out.

The Ray path's overhead per episode is measured per episode, at concurrency 1: the time the
caller waits minus the episode's own ``wall_s`` (a task submission, the episode's transfer
back, the actor's loop), ray minus local; whole-episode times vary too much on a busy machine
to show it as a difference. At
``--concurrency`` the episodes/s of 1 node against 2 nodes: on one machine both nodes share
its cores, so read the ratio, not the absolute figure.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from headline import headline

from palaestra.env.registry import load_tasks, make, make_policy
from palaestra.run.executor import EpisodeExecutor, LocalExecutor
from palaestra.run.ray_executor import RayExecutor, RayOptions


async def timed(
    executor: EpisodeExecutor, ids: list[str], concurrency: int
) -> tuple[float, list[float]]:
    """Seconds to run one episode of each of ``ids``, ``concurrency`` at a time, and each
    episode's time outside its rollout: the caller's wait minus the episode's own ``wall_s``
    (for Ray: the submission, the transfer back, the actor's loop)."""
    gate = asyncio.Semaphore(concurrency)
    outside: list[float] = []

    async def one(i: int, task_id: str) -> None:
        async with gate:
            started = time.perf_counter()
            episode = await executor.run(i, {"task_id": task_id})
            outside.append(time.perf_counter() - started - episode.wall_s)
            assert not episode.end.infra_error, (task_id, episode.end)

    started = time.perf_counter()
    await asyncio.gather(*(one(i, t) for i, t in enumerate(ids)))
    return time.perf_counter() - started, outside


async def measure(
    executor: EpisodeExecutor, ids: list[str], concurrency: int
) -> tuple[float, float]:
    """Episodes/s of ``executor`` after a warm-up round, and the median time per episode
    spent outside the rollout (ms)."""
    try:
        if isinstance(executor, RayExecutor):
            await executor.start()
            await executor.nodes()
        await timed(executor, ids[: 2 * concurrency], concurrency)  # warm-up
        wall, outside = await timed(executor, ids, concurrency)
        return len(ids) / wall, 1000 * statistics.median(outside)
    finally:
        await executor.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="auto", help="the Ray cluster (default: auto)")
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--family", default="edit-distance")
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    import ray

    ray.init(address=args.address, log_to_driver=False, logging_level="error")
    try:
        env = f"gen/{args.family}:0:{args.episodes}"
        tasks = load_tasks(env)
        ids = [t.id for t in tasks]

        def local() -> LocalExecutor:
            return LocalExecutor(lambda: make(env, tasks=tasks), make_policy("nop"))

        def on_ray(actors: int, concurrency: int) -> RayExecutor:
            options = RayOptions(actors=actors, slots=-(-concurrency // actors))
            return RayExecutor(env, "nop", options, concurrency=concurrency, env_overrides={})

        rows: list[tuple[str, Any, Any]] = []
        serial_n = max(4, args.episodes // 3)
        local_1, local_out = await measure(local(), ids[:serial_n], 1)
        ray_1, ray_out = await measure(on_ray(1, 1), ids[:serial_n], 1)
        rows.append(("concurrency 1: s/episode (local, ray)", f"{1 / local_1:.3f}",
                     f"{1 / ray_1:.3f}"))  # fmt: skip
        rows.append(("concurrency 1: ms/episode outside the rollout", f"{local_out:.1f}",
                     f"{ray_out:.1f}"))  # fmt: skip
        c = args.concurrency
        local_c, _ = await measure(local(), ids, c)
        one_node, _ = await measure(on_ray(1, c), ids, c)
        two_nodes, two_out = await measure(on_ray(2, c), ids, c)
        rows.append((f"concurrency {c}: ms/episode outside (ray 2 nodes)", "", f"{two_out:.1f}"))
        rows.append((f"concurrency {c}: episodes/s local", f"{local_c:.2f}", ""))
        rows.append((f"concurrency {c}: episodes/s ray 1 node, 2 nodes", f"{one_node:.2f}",
                     f"{two_nodes:.2f}"))  # fmt: skip
        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        print(f"bench_ray: {env}, nop episodes, cluster of {nodes} nodes")
        for name, a, b in rows:
            print(f"  {name:<48} {a:>8} {b:>8}")
        print(f"  Ray overhead per episode (concurrency 1)       {ray_out - local_out:8.1f} ms")
        print(f"  2 nodes / 1 node                               {two_nodes / one_node:8.2f}x")
        print(f"  ray 2 nodes / local                            {two_nodes / local_c:8.2f}x")
        headline(
            "ray", overhead_ms=round(ray_out - local_out, 1), local_eps=round(local_c, 2),
            one_node_eps=round(one_node, 2), two_nodes_eps=round(two_nodes, 2),
        )  # fmt: skip
    finally:
        ray.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
