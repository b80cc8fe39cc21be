"""Which btrfs quota accounting a directory's filesystem uses, read from mountinfo and sysfs:
the docker backend sizes a container's ``storage_mb`` limit by it."""

from __future__ import annotations

from pathlib import Path

import pytest

from palaestra.sandbox import btrfs_quota
from palaestra.sandbox.btrfs_quota import btrfs_device, quota_mode

MOUNTINFO = """\
22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
40 22 7:0 / /var/lib/palaestra/docker rw,relatime shared:20 - btrfs /dev/loop0 rw,space_cache=v2
41 40 7:0 / /var/lib/palaestra/docker/btrfs rw,relatime shared:20 - btrfs /dev/loop0 rw
50 22 0:45 / /srv/my\\040data rw,relatime shared:30 - btrfs /dev/loop3 rw
51 22 0:49 / /srv/données\\0402 rw,relatime shared:31 - btrfs /dev/loop4 rw
60 22 0:46 / /var/lib/palaestra/docker-tmp rw - tmpfs tmpfs rw
70 22 0:47 / /mnt/over rw - btrfs /dev/loop5 rw
71 22 0:48 / /mnt/over rw - ext4 /dev/vdb rw
"""


@pytest.mark.parametrize(
    "path, device",
    [
        ("/var/lib/palaestra/docker", "/dev/loop0"),
        ("/var/lib/palaestra/docker/btrfs/subvolumes/x", "/dev/loop0"),
        ("/srv/my data/docker", "/dev/loop3"),  # mountinfo escapes the space
        ("/srv/données 2/docker", "/dev/loop4"),  # and leaves UTF-8 as it is
        ("/var/lib/palaestra/docker-tmp/x", None),  # a prefix of the name is not a parent
        ("/var/lib/docker", None),  # on the ext4 root
        ("/mnt/over/x", None),  # the last mount on a mount point hides the earlier one
    ],
)
def test_the_device_of_the_btrfs_mount_a_path_lies_on(path: str, device: str | None) -> None:
    assert btrfs_device(path, MOUNTINFO) == device


def fake_sysfs(root: Path, filesystems: dict[str, tuple[str, str | None]]) -> Path:
    for uuid, (device, mode) in filesystems.items():
        (root / uuid / "devices").mkdir(parents=True)
        (root / uuid / "devices" / device).touch()
        if mode is not None:
            (root / uuid / "qgroups").mkdir()
            if mode != "no mode file":
                (root / uuid / "qgroups" / "mode").write_text(mode + "\n")
    return root


@pytest.mark.parametrize(
    "mode, expected",
    [("squota", "squota"), ("qgroup", "qgroup"), ("no mode file", "qgroup"), (None, None)],
)
def test_quota_mode_of_the_filesystem_that_has_the_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str | None, expected: str | None
) -> None:
    """``no mode file``: a kernel before 6.7, where full qgroups are the only kind; None: quotas
    off. Another btrfs filesystem's mode does not leak into the answer."""
    sysfs = fake_sysfs(
        tmp_path,
        {
            "460f0e99-17ee-4e31-a0a4-614c96786617": ("loop0", mode),
            "acb32214-f972-4c6a-8148-0eb16e17b23c": ("loop3", "squota"),
        },
    )
    monkeypatch.setattr(btrfs_quota, "btrfs_device", lambda path: "/dev/loop0")
    assert quota_mode("/var/lib/palaestra/docker", sysfs) == expected


def test_this_machines_proc_is_not_btrfs() -> None:
    """The real mountinfo: /proc lies on procfs, whatever the root filesystem is."""
    assert btrfs_device("/proc/self") is None
    assert quota_mode("/proc/self") is None
