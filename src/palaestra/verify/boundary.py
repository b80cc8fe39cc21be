"""The boundary between the agent's phase and the verifier's, in the agent's own sandbox.

The verifier trusts nothing the agent left behind. Around ``tests/test.sh`` it does, in order:

1. before: every process in the sandbox is killed, the image's service included
   (:meth:`Sandbox.kill_all`; only the in-sandbox helper survives), and the service is started
   again from the image's ``ENTRYPOINT``, as at creation, so the tests have it (Harbor's
   semantics) and nothing the agent made it start (by ptrace, say) runs. In a task with ``[metadata] sealed_system = true`` (palaestra's own
   tasks) the system directories (:data:`SYSTEM_DIRS`) must then be as the sandbox started, as
   its backend's storage sees them (:meth:`Sandbox.changed_paths`): an agent that was root may
   have patched the interpreter the tests run, a ``.pth`` file or ``sitecustomize`` it loads, a
   command on ``PATH`` or the loader's preload list. If it did, the tests do not run: the
   episode is an error of class ``SystemTampered``. Then ``/logs`` and ``/tests`` are made real
   directories owned by root (a symbolic link planted there is removed), ``/logs/verifier`` is
   removed and created afresh, root-owned, mode 755 (a link planted in it to a file the agent
   keeps writing is gone), and ``/tests`` is emptied and made root-only (mode 700), so code
   the tests run as another user cannot read them (generated tasks keep their reference there).
   A separate verifier (Harbor's ``environment_mode = "separate"``) runs all this in a fresh
   sandbox of its own, where the agent's files are data copied in: its image's ``/tests`` is
   kept, not emptied;
2. ``test.sh`` runs through :data:`RUN_SH`, which notes the state of both reward files the
   moment ``test.sh`` exits, in :data:`END_STATE` (under root-only ``/logs``);
3. after: every process in the sandbox is killed again, the service included and not started
   again, *before* the reward is read: nothing ``test.sh`` started (a background process the
   agent's code left) may write once it ended;
4. the reward files are checked (:func:`check_reward_files`): each present one must be a
   regular file, with one link, owned by root, and unchanged since ``test.sh`` exited. Anything
   else is a verifier error, never a reward.

What this does not do: stop agent code that ``test.sh`` itself runs *as root* from writing the
reward while the tests run. Harbor's tasks run as root, as in Harbor; palaestra's own tasks run
the agent's code as ``nobody`` (see docs/trust.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from palaestra.tasks.paths import LOGS_DIR, REWARD_JSON, REWARD_TXT, TESTS_DIR, VERIFIER_DIR

#: The system directories an agent may not change in a task with ``sealed_system``: the
#: interpreters, the ``PATH`` directories, the site-packages (``.pth``, ``sitecustomize``), the
#: dynamic loader's configuration (``/etc/ld.so.preload``).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")

#: Where :data:`RUN_SH` notes the reward files' state when ``test.sh`` exits.
END_STATE = f"{LOGS_DIR}/.palaestra-test-sh-ended"

#: Step 1's directories, and the tests: with the argument ``fresh``, ``/tests`` is emptied and
#: the tar archive on stdin (the task's ``tests/``, its ``test.sh`` executable, no entry for
#: the directory itself: :func:`~.harbor._pack_tests`) unpacked into it; with ``keep``,
#: ``/tests`` keeps its files (the image of a separate verifier holds its tests: Harbor's
#: bundled tests) and its ``test.sh`` is made executable. ``install -d`` creates or fixes a
#: directory's owner and mode in one process; ``rm`` runs only when there is something to
#: remove (an episode whose agent never made those paths has none). One command, few processes
#: (sh, rm when needed, install twice, tar): it runs once per episode.
PREPARE_SH = f"""
set -e
for d in {LOGS_DIR} {TESTS_DIR}; do
  if [ -L "$d" ] || {{ [ -e "$d" ] && [ ! -d "$d" ]; }}; then rm -f "$d"; fi
done
mode=$1
if [ "$mode" = fresh ]; then
  set -- {VERIFIER_DIR} {END_STATE} {TESTS_DIR}/* {TESTS_DIR}/.[!.]* {TESTS_DIR}/..?*
else
  set -- {VERIFIER_DIR} {END_STATE}
fi
for p in "$@"; do  # no rm to start when none of them is there (an unmatched glob stays as is)
  if [ -e "$p" ] || [ -L "$p" ]; then rm -rf "$@"; break; fi
done
install -d -o 0 -g 0 -m 755 {LOGS_DIR} {VERIFIER_DIR}
install -d -o 0 -g 0 -m 700 {TESTS_DIR}
if [ "$mode" = fresh ]; then
  exec tar -x --no-same-owner -f - -C {TESTS_DIR}
elif [ -f {TESTS_DIR}/test.sh ] && [ ! -x {TESTS_DIR}/test.sh ]; then
  chmod +x {TESTS_DIR}/test.sh
fi
"""

#: One line per reward file that exists: ``path|type|links|owner uid|inode|size|mtime``.
_STAT = (
    f'for f in {REWARD_JSON} {REWARD_TXT}; do [ -e "$f" ] || [ -L "$f" ] || continue; '
    "stat -c '%n|%F|%h|%u|%i|%s|%y' \"$f\"; done"
)

#: ``test.sh`` runs (executable since step 1); its exit status is this command's; the reward
#: files' state is noted the moment it exits.
RUN_SH = f"""
{TESTS_DIR}/test.sh
rc=$?
{{ {_STAT}; }} > {END_STATE} 2>/dev/null
exit $rc
"""

#: A file's lines, by the shell's own ``read`` (no ``cat`` to start): the state files and
#: the reward hold text lines.
_SHOW = 'while IFS= read -r l || [ -n "$l" ]; do printf "%s\\n" "$l"; done < '

#: Prints the state noted at the end, a separator, the state now, a separator, then which
#: reward file there is (``json``, ``txt`` or ``none``) on a line and its content: one command.
STATE_SH = (
    f"{{ {_SHOW}{END_STATE}; }} 2>/dev/null; echo ---; {_STAT}; echo ---; "
    f"if [ -f {REWARD_JSON} ]; then echo json; {_SHOW}{REWARD_JSON}; "
    f"elif [ -f {REWARD_TXT} ]; then echo txt; {_SHOW}{REWARD_TXT}; else echo none; fi"
)


class BoundaryError(ValueError):
    """The reward files are not what ``test.sh`` left when it exited."""


@dataclass(frozen=True)
class FileState:
    path: str
    kind: str
    links: int
    uid: int
    identity: str  # inode, size and mtime: any write changes it

    @classmethod
    def parse(cls, line: str) -> FileState:
        path, kind, links, uid, inode, size, mtime = line.split("|", 6)
        return cls(path, kind, int(links), int(uid), f"{inode}|{size}|{mtime}")


def _states(text: str) -> dict[str, FileState]:
    states = (FileState.parse(line) for line in text.splitlines() if line.strip())
    return {s.path: s for s in states}


def check_reward_files(state_output: str) -> tuple[str, str]:
    """Check :data:`STATE_SH`'s output: raise :class:`BoundaryError` naming the problem, else
    return which reward file there is (``json``, ``txt`` or ``none``) and its content."""
    parts = state_output.split("---\n", 2)
    if len(parts) != 3:
        raise BoundaryError(f"could not read the reward files' state: {state_output[-300:]!r}")
    ended_text, now_text, reward = parts
    kind, _, content = reward.partition("\n")
    ended, now = _states(ended_text), _states(now_text)
    for path, state in now.items():
        if state.kind not in ("regular file", "regular empty file"):
            raise BoundaryError(f"{path} is a {state.kind}, not a regular file")
        if state.links != 1:
            raise BoundaryError(f"{path} has {state.links} hard links; a reward file has one")
        if state.uid != 0:
            raise BoundaryError(f"{path} is owned by uid {state.uid}, not root")
    if ended != now:
        raise BoundaryError(
            "the reward files changed after tests/test.sh exited (a process it started kept "
            f"running and wrote them): when it exited {[ended[k] for k in sorted(ended)]!r}, "
            f"when read {[now[k] for k in sorted(now)]!r}"
        )
    return kind, content
