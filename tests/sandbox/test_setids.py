"""palaestra-setids, the launcher that starts bubblewrap as the sandboxes' unprivileged uid:
built static into the runtime bundle, it changes every id or runs nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from palaestra.sandbox.helper_runtime import _SETIDS_C, SETIDS, helper_runtime, setids_argv
from palaestra.sandbox.mounts import mount, unmount

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="changing ids needs root")

#: Prints the real, effective and saved uids and gids, and the supplementary groups.
IDS = "grep -E '^(Uid|Gid|Groups):' /proc/self/status"


def test_it_is_what_the_local_backend_starts_bwrap_through() -> None:
    launcher = helper_runtime() / SETIDS
    assert setids_argv(2_000_000_123) == [str(launcher), "2000000123"]
    ldd = subprocess.run(["ldd", str(launcher)], capture_output=True, text=True)
    assert "not a dynamic executable" in ldd.stdout + ldd.stderr


def test_every_id_changes_and_no_group_is_left() -> None:
    res = subprocess.run(
        [*setids_argv(2_000_000_123), "sh", "-c", IDS],
        capture_output=True,
        text=True,
        check=True,
        # a supplementary group to lose: root's own list may be empty
        preexec_fn=lambda: os.setgroups([4, 27]),
    )
    fields = {line.split(":")[0]: line.split(":")[1].split() for line in res.stdout.splitlines()}
    assert fields["Uid"] == ["2000000123"] * 4  # real, effective, saved, filesystem
    assert fields["Gid"] == ["2000000123"] * 4
    assert fields["Groups"] == []


@pytest.mark.parametrize("uid", ["", "12a", "-1", "4294967295", "99999999999999999999"])
def test_a_bad_uid_runs_nothing(uid: str, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    res = subprocess.run(
        [str(helper_runtime() / SETIDS), uid, "touch", str(marker)], capture_output=True, text=True
    )
    assert res.returncode == 127
    assert "is not a uid" in res.stderr
    assert not marker.exists()


def test_without_the_right_to_change_ids_it_runs_nothing() -> None:
    with tempfile.TemporaryDirectory() as open_dir:  # the unprivileged uid must reach it
        os.chmod(open_dir, 0o777)
        launcher, marker = Path(open_dir, "setids"), Path(open_dir, "ran")
        shutil.copy2(helper_runtime() / SETIDS, launcher)
        # Already unprivileged: changing to another uid fails, and nothing is exec'd.
        res = subprocess.run(
            [*setids_argv(2_000_000_123), str(launcher), "2000000124", "touch", str(marker)],
            capture_output=True,
            text=True,
        )
        assert not marker.exists()
    assert res.returncode == 126
    assert "cannot become 2000000124" in res.stderr


def test_it_compiles_without_warnings() -> None:
    flags = ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"]
    res = subprocess.run(["cc", *flags, str(_SETIDS_C)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_detached_mounts_are_gone_for_the_program_only(tmp_path: Path) -> None:
    gone, kept = tmp_path / "gone", tmp_path / "kept"
    made = []
    try:
        for path in (gone, kept):
            path.mkdir()
            mount("tmpfs", path, "tmpfs", "size=1m")
            made.append(path)
        not_a_mount = str(tmp_path)  # passed over
        res = subprocess.run(
            [*setids_argv(2_000_000_123, (str(gone), not_a_mount)), "cat", "/proc/self/mountinfo"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert f" {gone} " not in res.stdout and f" {kept} " in res.stdout
        assert f" {gone} " in Path("/proc/self/mountinfo").read_text()  # the host keeps it
    finally:
        for path in reversed(made):
            unmount(str(path))


def test_a_detach_list_without_its_end_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    launcher = str(helper_runtime() / SETIDS)
    res = subprocess.run(
        [launcher, "--detach", "/sys", "2000000123", "touch", str(marker)],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 127 and "usage" in res.stderr
    assert not marker.exists()
