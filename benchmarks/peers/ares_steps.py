"""ARES's half of the per-step overhead comparison; run.py runs it in ARES's own virtualenv.

Python 3.12 with martian-ares 0.1.0 (it never imports palaestra). The same work as palaestra's
half: ARES's ``CodeEnvironment`` with its mini-swe-agent scaffold on one Harbor task, an instant
policy answering every observation with a ```` ```bash true``` ```` block, ``env.step`` timed
(the policy's time is nil), on a container that does nothing (``null``: the framework alone) or
on ARES's Docker container (``docker``), whose bare ``exec_run("true")`` round trip is timed
alongside in a container of the same image. Prints one JSON object on stdout:
``{"step_s": [...], "exec_s": [...]}`` (seconds; ``exec_s`` empty for ``null``).

Run: ``.venvs/ares/bin/python ares_steps.py TASK_DIR --container null|docker``, with
``HARBOR_SUPABASE_URL`` pointing at run.py's stand-in registry (``import ares`` lists the
Harbor registry's datasets).
"""

import argparse
import asyncio
import json
import pathlib
import re
import time

import docker
from ares.containers import containers
from ares.containers.docker import DockerContainer
from ares.environments.code_env import CodeEnvironment
from ares.llms.response import LLMResponse, TextData, Usage
from harbor.models.task.task import Task

TRUE = LLMResponse(
    data=[TextData(content="```bash\ntrue\n```")],
    cost=0.0,
    usage=Usage(prompt_tokens=0, generated_tokens=0),
)


class NullContainer(containers.Container):
    """Does nothing, instantly: isolates ARES's own per-step cost."""

    @classmethod
    def from_image(cls, **_: object) -> "NullContainer":
        return cls()

    @classmethod
    def from_dockerfile(cls, **_: object) -> "NullContainer":
        return cls()

    async def start(self, env: dict[str, str] | None = None) -> None: ...

    async def stop(self) -> None: ...

    async def exec_run(self, command: str, **_: object) -> containers.ExecResult:
        return containers.ExecResult(output="", exit_code=0)

    async def upload_files(
        self, local_paths: list[pathlib.Path], remote_paths: list[str]
    ) -> None: ...

    async def download_files(
        self, remote_paths: list[str], local_paths: list[pathlib.Path]
    ) -> None: ...

    def stop_and_remove(self) -> None: ...


async def per_step(task: Task, factory: type, steps: int, episodes: int) -> list[float]:
    samples: list[float] = []
    # ARES's step limit ends the episode on the step that reaches it: one more than palaestra's.
    async with CodeEnvironment(
        tasks=[task], container_factory=factory, step_limit=steps + 1
    ) as env:
        for _ in range(episodes):
            ts = await env.reset()
            while ts.step_type != "LAST":
                t = time.perf_counter()
                ts = await env.step(TRUE)
                if ts.step_type == "MID":
                    samples.append(time.perf_counter() - t)
    return samples


async def exec_round_trip(task: Task, n: int) -> list[float]:
    container = DockerContainer.from_dockerfile(
        dockerfile_path=task.paths.environment_dir / "Dockerfile"
    )
    await container.start()
    try:
        await container.exec_run("true")
        samples = []
        for _ in range(n):
            t = time.perf_counter()
            await container.exec_run("true")
            samples.append(time.perf_counter() - t)
        return samples
    finally:
        await container.stop()


def prebuild(task: Task) -> None:
    """Build the task's image once, removing the build's containers.

    ARES builds it through docker-py, whose default keeps each step's intermediate container;
    after this its builds are cache hits that make none.
    """
    docker.from_env().images.build(path=str(task.paths.environment_dir), rm=True)


def untag_images(since: int) -> None:
    """Remove the image tags ARES made since ``since``: it tags the image once per reset."""
    client = docker.from_env()
    for image in client.images.list():
        for tag in image.tags:
            made = re.match(r"ares\.harbor_env\.[^.]+\.(\d+)\.", tag)
            if made and int(made[1]) >= since:
                client.images.remove(tag)


async def main(args: argparse.Namespace) -> None:
    task = Task(task_dir=args.task)
    if args.container == "null":
        step_s, exec_s = await per_step(task, NullContainer, args.steps, args.episodes), []
    else:
        since = int(time.time())
        prebuild(task)
        try:
            step_s = await per_step(task, DockerContainer, args.steps, args.episodes)
            exec_s = await exec_round_trip(task, len(step_s))
        finally:
            untag_images(since)
    print(json.dumps({"step_s": step_s, "exec_s": exec_s}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("task", type=pathlib.Path, help="a Harbor task directory")
    parser.add_argument("--container", choices=["null", "docker"], default="null")
    parser.add_argument("--steps", type=int, default=50, help="steps per episode")
    parser.add_argument("--episodes", type=int, default=5)
    asyncio.run(main(parser.parse_args()))
