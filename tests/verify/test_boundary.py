"""The reward files' checks at the verifier's phase boundary (:mod:`palaestra.verify.boundary`)."""

from __future__ import annotations

import pytest

from palaestra.verify.boundary import BoundaryError, check_reward_files

JSON = "/logs/verifier/reward.json"
TXT = "/logs/verifier/reward.txt"


def line(path: str = JSON, kind: str = "regular file", links: int = 1, uid: int = 0,
         mtime: str = "2026-01-01 00:00:00.000000001 +0000") -> str:  # fmt: skip
    return f"{path}|{kind}|{links}|{uid}|1234|15|{mtime}"


def test_untouched_reward_files_pass_with_their_content() -> None:
    state = f"{line()}\n{line(TXT)}\n---\n{line()}\n{line(TXT)}\n---\n"
    content = '{"reward": 1}\n---\n'  # the content may hold the separator: it comes last
    assert check_reward_files(state + "json\n" + content) == ("json", content)
    # no reward file at all: the reader says so
    assert check_reward_files("---\n---\nnone\n") == ("none", "")


@pytest.mark.parametrize(
    ("now", "match"),
    [
        (line(kind="symbolic link"), "not a regular file"),
        (line(kind="directory"), "not a regular file"),
        (line(links=2), "2 hard links"),
        (line(uid=65534), "owned by uid 65534"),
        (line(mtime="2026-01-01 00:00:00.5 +0000"), "changed after tests/test.sh exited"),
        (f"{line()}\n{line(TXT)}", "changed after tests/test.sh exited"),
    ],
)
def test_reward_files_the_tests_did_not_leave_are_errors(now: str, match: str) -> None:
    with pytest.raises(BoundaryError, match=match):
        check_reward_files(f"{line()}\n---\n{now}\n---\njson\n{{}}")


def test_unreadable_state_is_an_error() -> None:
    with pytest.raises(BoundaryError, match="could not read"):
        check_reward_files("sh: stat: not found")
    with pytest.raises(BoundaryError, match="could not read"):
        check_reward_files(f"{line()}\n---\n{line()}\n")  # the reward part is missing
