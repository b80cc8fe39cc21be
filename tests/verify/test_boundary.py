"""The verifier's phase boundary (:mod:`palaestra.verify.boundary`): the reward files' checks,
and the directories it hands the tests."""

from __future__ import annotations

import pytest

from palaestra import CodeEnv
from palaestra.llm import ScriptedPolicy
from palaestra.run import rollout
from palaestra.tasks import load_task
from palaestra.verify.boundary import BoundaryError, check_reward_files
from tests.conftest import SUBMIT_ACTION, bash_action

JSON = "/logs/verifier/reward.json"
TXT = "/logs/verifier/reward.txt"


def line(
    path: str = JSON,
    kind: str = "regular file",
    links: int = 1,
    uid: int = 0,
    mtime: str = "2026-01-01 00:00:00.000000001 +0000",
) -> str:
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


#: A test.sh (without a shebang: run by sh as Harbor's are) that reports what it finds: the
#: owner and mode of the boundary's directories, and whether it is executable itself.
REPORT_SH = """\
found="$(stat -c '%a:%u' /tests /logs /logs/verifier | tr '\\n' ' ')x:$([ -x /tests/test.sh ] && echo y)"
echo "$found"
if [ "$found" = "700:0 755:0 755:0 x:y" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""


async def test_the_boundary_makes_the_directories_roots_whatever_the_agent_left(
    make_task,
) -> None:
    """The agent leaves /tests, /logs and /logs/verifier nobody's and world-writable; the task's
    test.sh is not executable in its directory. test.sh finds /tests root's with mode 700 (the
    archive of the tests, unpacked into it, does not reopen it), /logs and /logs/verifier
    root's with mode 755, and itself executable."""
    path = make_task("boundary-report", test_sh=REPORT_SH)
    (path / "tests" / "test.sh").write_text(REPORT_SH)  # no shebang, mode 644
    assert not (path / "tests" / "test.sh").stat().st_mode & 0o111
    leave_open = (
        "mkdir -p /tests /logs/verifier && chmod 777 /tests /logs /logs/verifier && "
        "chown 65534:65534 /tests /logs /logs/verifier"
    )
    policy = ScriptedPolicy([bash_action(leave_open), SUBMIT_ACTION])
    async with CodeEnv([load_task(path)], sandbox="local") as env:
        episode = await rollout(env, policy)
    assert episode.end.verifier is not None, episode.end
    assert episode.reward == 1.0, episode.end.verifier.output
