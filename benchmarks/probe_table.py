"""The local sandbox beside Docker's default profile: the probe's table for docs/sandbox.md.

Runs the sandbox probe (``tests/sandbox/probe/probe.c``, the one
``tests/sandbox/test_probe.py`` runs) in a local sandbox and in a container of the docker backend
on this machine, both with the default ``SandboxSpec()``, and prints the Markdown table: one row
per check, Docker's result, the local sandbox's, and **weaker** where the local sandbox lets its
processes do more. Then the lines where it is weaker, with what it exposes beyond Docker.

Run: ``.venv/bin/python benchmarks/probe_table.py`` (as root, with bubblewrap and the Docker
engine of ``scripts/provision-docker.sh``). ``--helper c|python`` picks the local helper.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
from pathlib import Path

from headline import headline

from palaestra.sandbox import SandboxSpec
from palaestra.sandbox.docker import DockerBackend, docker_unavailable
from palaestra.sandbox.local import LocalBackend

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.sandbox.probe import Line, markdown_table, run_probe, weaker_lines  # noqa: E402


async def probe_both() -> tuple[dict[str, Line], dict[str, Line]]:
    """The probe's lines in a Docker container and in a local sandbox, run at the same time."""
    if reason := await docker_unavailable():
        raise SystemExit(f"probe_table: {reason}")
    local, docker = LocalBackend(), DockerBackend()
    try:
        async with (
            await local.create(SandboxSpec()) as sandbox,
            await docker.create(SandboxSpec()) as container,
        ):
            return await asyncio.gather(run_probe(container), run_probe(sandbox))
    finally:
        await asyncio.gather(local.aclose(), docker.aclose())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--helper", choices=("c", "python"), help="the local sandbox's helper")
    args = parser.parse_args()
    if args.helper:
        os.environ["PALAESTRA_HELPER"] = args.helper
    docker, local = asyncio.run(probe_both())
    print(f"kernel {platform.release()}, {platform.machine()}\n")
    print(markdown_table(docker, local))
    weaker = weaker_lines(local, docker)
    print(f"\nlocal weaker than Docker on {len(weaker)} of {len(docker)} lines")
    for line in weaker:
        print(f"- {line}")
    headline("probe", lines=len(docker), local_weaker=len(weaker))


if __name__ == "__main__":
    main()
