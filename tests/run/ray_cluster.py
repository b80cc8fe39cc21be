"""A real Ray cluster on this machine for the Ray tests: a head node and a second node with
resources of its own (``node2``), each with its own temp dir, started with ``ray start`` and
stopped by killing exactly the processes that name those temp dirs (and their children),
never by a broad name (``ray stop`` would stop every Ray node of the user); then its directory
(temp dirs, logs, sandbox state) is removed."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.procs import host_pids

RAY = str(Path(sys.executable).with_name("ray"))


@dataclass
class LocalCluster:
    address: str
    root: Path
    temp_dirs: list[Path]
    state_dir: Path

    def pids(self) -> list[int]:
        """Every process of the cluster: those naming a temp dir or its address, and their
        descendants."""
        needles = [str(d) for d in self.temp_dirs]
        if self.address:  # the Ray client server names only the address
            needles.append(f"--address={self.address}\x00")
        roots = {pid for needle in needles for pid in host_pids(needle)}
        found = set(roots)
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                pid = int(entry)
                chain = pid
                for _ in range(64):
                    try:
                        with open(f"/proc/{chain}/stat") as f:
                            chain = int(f.read().rsplit(")", 1)[1].split()[1])
                    except (OSError, ValueError, IndexError):
                        break
                    if chain in roots:
                        found.add(pid)
                        break
                    if chain <= 1:
                        break
        return sorted(found)

    def stop(self) -> None:
        pids = self.pids()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + (3 if sig == signal.SIGTERM else 10)
            while time.monotonic() < deadline and any(_alive(p) for p in pids):
                time.sleep(0.1)
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class ExtraNode:
    """One more node of a :class:`LocalCluster`, to kill mid-run (its raylet, its workers and
    whatever they started, by SIGKILL: as a machine that dies)."""

    cluster: LocalCluster
    temp_dir: Path

    def pids(self) -> list[int]:
        """Its raylet, workers and whatever they started."""
        return LocalCluster("", self.cluster.root, [self.temp_dir], self.cluster.state_dir).pids()

    def kill(self) -> None:
        pids = self.pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.1)
        self.cluster.temp_dirs.remove(self.temp_dir)


def add_node(cluster: LocalCluster, src: Path, name: str, cpus: int = 2) -> ExtraNode:
    """``ray start`` one more node into ``cluster``, with the custom resource ``name``."""
    temp_dir = cluster.root / name
    cluster.temp_dirs.append(temp_dir)
    subprocess.run(
        [
            RAY,
            "start",
            f"--address={cluster.address}",
            f"--temp-dir={temp_dir}",
            f"--resources={json.dumps({name: 1})}",
            "--num-cpus",
            str(cpus),
            "--disable-usage-stats",
        ],
        env=_env(src, cluster.state_dir),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return ExtraNode(cluster, temp_dir)


def _env(src: Path, state_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(src),
        "PALAESTRA_STATE_DIR": str(state_dir),
        "RAY_USAGE_STATS_ENABLED": "0",
    }


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def start_cluster(src: Path, cpus: int = 2) -> LocalCluster:
    """``ray start --head`` plus a second node; the nodes' workers import palaestra from
    ``src`` and keep their sandboxes in a state dir of their own."""
    root = Path(tempfile.mkdtemp(prefix="pray-", dir="/tmp"))  # short: Ray's socket paths
    root.chmod(0o711)  # the local sandboxes' uid passes through to their state directory
    state_dir = root / "sandboxes"
    env = _env(src, state_dir)
    common = ["--num-cpus", str(cpus), "--disable-usage-stats"]
    head_dir, node_dir = root / "h", root / "n"
    cluster = LocalCluster("", root, [head_dir, node_dir], state_dir)
    try:
        out = subprocess.run(
            [
                RAY,
                "start",
                "--head",
                "--port=0",
                f"--temp-dir={head_dir}",
                "--include-dashboard=false",
                *common,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        match = re.search(r"ray start --address='([^']+)'", out.stdout + out.stderr)
        assert match, out.stdout + out.stderr
        cluster.address = match.group(1)
        subprocess.run(
            [
                RAY,
                "start",
                f"--address={cluster.address}",
                f"--temp-dir={node_dir}",
                f"--resources={json.dumps({'node2': 1})}",
                *common,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
    except BaseException:
        cluster.stop()
        raise
    return cluster
