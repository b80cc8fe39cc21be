"""The host mounts a local sandbox's bubblewrap does without (local/mountns.py): which are
left out, and, on the real kernel, that bwrap runs without them while the sandbox still gets
every mount it is given."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from palaestra.sandbox import Mount, SandboxSpec
from palaestra.sandbox.local import LocalBackend
from palaestra.sandbox.local.mountns import bind_sources, detachable, mount_points
from palaestra.sandbox.mounts import mount, unmount
from tests.sandbox.conftest import new_run_id

as_root = pytest.mark.skipif(
    shutil.which("bwrap") is None or os.geteuid() != 0, reason="needs bubblewrap, as root"
)


def read(path: str) -> str:
    return Path(path).read_text()


def test_what_is_above_or_below_a_source_stays_and_the_rest_goes() -> None:
    points = [
        "/",
        "/sys",
        "/sys/fs/cgroup",
        "/sys/fs/cgroup/cpu",
        "/proc",
        "/proc/sys/fs/binfmt_misc",
        "/data",
        "/data/sub",
        "/data-other",
        "/state/run/sb-1/fs",
        "/state/run/sb-2/fs",
        "/state/run/sb-2/root",
    ]
    needed = ["/proc", "/data", "/state/run/sb-1/fs/workspace"]
    assert detachable(points, needed) == [
        "/data-other",  # a name that only starts like a source's
        "/state/run/sb-2/fs",
        "/state/run/sb-2/root",
        "/sys",  # with everything below it
    ]


def test_stacked_mounts_are_each_detached() -> None:
    points = ["/", "/mnt/a", "/mnt/a", "/mnt/a/b", "/usr"]
    assert detachable(points, ["/usr"]) == ["/mnt/a", "/mnt/a"]


def test_a_source_reached_through_a_link_keeps_where_the_link_leads(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    points = ["/", str(real), str(tmp_path / "other")]
    assert detachable(points, [str(tmp_path / "link")]) == [str(tmp_path / "other")]


def test_bind_sources_are_the_paths_bwrap_binds() -> None:
    args = ["--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--proc", "/proc"]
    args += ["--bind", "/w", "/workspace", "--dev-bind", "/dev/null", "/x", "--tmpfs", "/t"]
    assert bind_sources(args) == ["/usr", "/w", "/dev/null"]


@pytest.fixture
def host_mounts(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """An unrelated tmpfs, and a tmpfs given to the sandbox with a tmpfs mounted below it."""
    unrelated, given = tmp_path / "unrelated", tmp_path / "given"
    made: list[Path] = []
    try:
        for path in (unrelated, given, given / "below"):
            path.mkdir()
            mount("tmpfs", path, "tmpfs", "size=1m,mode=755")
            made.append(path)
        (given / "top.txt").write_text("top\n")
        (given / "below" / "sub.txt").write_text("sub\n")
        yield unrelated, given
    finally:
        for path in reversed(made):
            unmount(str(path))


@pytest.fixture
async def backend(tmp_path: Path, helper: str) -> AsyncIterator[LocalBackend]:
    backend = LocalBackend(run_id=new_run_id(), state_dir=tmp_path / "state")
    yield backend
    await backend.aclose()


@as_root
async def test_bwrap_runs_without_unrelated_mounts_and_the_sandbox_gets_its_own(
    backend: LocalBackend, host_mounts: tuple[Path, Path]
) -> None:
    unrelated, given = host_mounts
    spec = SandboxSpec(mounts=(Mount(str(given), "/data", read_only=True),), storage_mb=16)
    async with await backend.create(spec) as sandbox:
        # bwrap's own process stays in the namespace the launcher made for it
        bwrap_table = await asyncio.to_thread(read, f"/proc/{sandbox.bwrap_pid}/mountinfo")
        assert str(unrelated) not in bwrap_table
        assert str(given) in bwrap_table and str(sandbox.sandbox_dir / "fs") in bwrap_table
        assert str(unrelated) in await asyncio.to_thread(mount_points)  # the host keeps it
        res = await sandbox.exec("cat /data/top.txt /data/below/sub.txt && echo ok > f && cat f")
        assert res.ok and res.stdout == "top\nsub\nok\n", res
