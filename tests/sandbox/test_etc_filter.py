"""The host's /etc as local sandboxes see it: closed entries are left to the kernel (the host's
root is not mapped into a sandbox), readable secrets are masked."""

from __future__ import annotations

import os
from pathlib import Path

from palaestra.sandbox.local.bwrap import _filtered_etc


def _tree(root: Path) -> None:
    (root / "ssl" / "private").mkdir(parents=True)
    (root / "ssl" / "certs").mkdir()
    (root / "closed").mkdir()
    (root / "closed" / "private").mkdir()
    (root / "app.key").write_text("k")
    (root / "shadow").write_text("h")
    (root / "ssl" / "certs" / "ca.pem").write_text("c")
    (root / "ssl" / "private" / "server.pem").write_text("p")
    (root / "link.key").symlink_to("shadow")
    os.chmod(root / "shadow", 0o640)
    os.chmod(root / "closed", 0o700)


def _masks(args: list[str]) -> dict[str, str]:
    """target -> "file" or "dir" for each mask in bwrap arguments."""
    found = {}
    for i, arg in enumerate(args):
        if arg == "--tmpfs":
            found[args[i + 1]] = "dir"
        elif arg == "--ro-bind" and args[i + 1] == "/dev/null":
            found[args[i + 2]] = "file"
    return found


def test_only_secrets_others_could_read_are_masked(tmp_path: Path) -> None:
    _tree(tmp_path)
    os.chmod(tmp_path / "ssl" / "private", 0o755)
    os.chmod(tmp_path / "app.key", 0o644)
    args = _filtered_etc(str(tmp_path))
    assert args[:3] == ["--ro-bind", str(tmp_path), str(tmp_path)]
    assert _masks(args) == {
        str(tmp_path / "ssl" / "private"): "dir",
        str(tmp_path / "app.key"): "file",
    }


def test_closed_entries_are_left_to_the_kernel(tmp_path: Path) -> None:
    _tree(tmp_path)
    os.chmod(tmp_path / "ssl" / "private", 0o700)
    os.chmod(tmp_path / "app.key", 0o600)
    # shadow (0640), a secret inside a directory others cannot enter, links: no mask.
    assert _masks(_filtered_etc(str(tmp_path))) == {}


def test_a_directory_others_may_only_enter_is_masked_when_secret(tmp_path: Path) -> None:
    _tree(tmp_path)
    os.chmod(tmp_path / "ssl" / "private", 0o711)  # known names inside would be readable
    os.chmod(tmp_path / "app.key", 0o600)
    assert _masks(_filtered_etc(str(tmp_path))) == {str(tmp_path / "ssl" / "private"): "dir"}
