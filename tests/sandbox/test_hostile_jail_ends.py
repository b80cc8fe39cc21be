"""The verify-time jail's open ends (issue 29, after it merged), each an episode of a real task
on every backend of the ``backend`` fixture: an agent that solves the task and then leaves
something hostile in the jail's way. Each must still get its honest verdict.

* Files left by one run of agent code in ``/tmp``, ``/var/tmp`` and ``/dev/shm`` (a file, a
  FIFO, a link) must not reach the next run of the same verification.
* Special files in ``/app`` (a FIFO, a socket, a dangling link) must not stop the checker from
  copying ``/app`` for a run: they are skipped (or kept as links), and the verdict computed.
* A fork bomb or a memory hog in the agent's program is contained: reward 0, from the checker.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from palaestra.sandbox import SandboxBackend
from palaestra.tasks.generators import generate
from palaestra.tasks.generators import write as write_generated
from tests.sandbox.test_hostile_rewards import play

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier

FAMILY, SEED, DIFFICULTY = "stock-ledger", 1, 0.5  # three runs of /app/ledger.py

#: The right ledger.py, wrapped: a run that finds a mark left by an earlier run in a place
#: every run may write prints a wrong report; else it leaves its marks (a file, a FIFO, a
#: link) and answers right. Honest runs never see one another's marks.
MARK_EARLIER_RUNS = r"""
cd /app && mv ledger.py ledger_real.py
cat > ledger.py <<'EOF_MARK'
import os, runpy, sys
marks = [d + "/.ledger-mark" for d in ("/tmp", "/var/tmp", "/dev/shm")]
if any(os.path.lexists(m + end) for m in marks for end in ("", "-fifo", "-link")):
    print("{}")
    sys.exit(0)
for m in marks:
    for end, make in (("", lambda p: open(p, "w").close()), ("-fifo", os.mkfifo),
                      ("-link", lambda p: os.symlink("/", p))):
        try:
            make(m + end)
        except OSError:
            pass
runpy.run_path("/app/ledger_real.py", run_name="__main__")
EOF_MARK
"""


def _task(tmp_path: Path) -> tuple[Path, str]:
    task = write_generated(FAMILY, SEED, DIFFICULTY, tmp_path / FAMILY)
    solve = generate(FAMILY, SEED, DIFFICULTY).solution["solve.sh"]
    assert isinstance(solve, str)
    return task, solve


def _passed(episode) -> str:  # noqa: ANN001
    end = episode.end
    assert end.verifier is not None, f"{end.error_class}: {end.error_message}"
    output = end.verifier.output
    assert episode.reward == 1.0, output[-3000:]
    return output


async def test_tmp_files_of_a_run_never_reach_the_next_run(
    backend: SandboxBackend, tmp_path: Path
) -> None:
    """Each of the three runs leaves a file, a FIFO and a link in /tmp, /var/tmp and /dev/shm,
    and answers wrong if it finds one: every run finds none, so every report is right."""
    task, solve = _task(tmp_path)
    output = _passed(await play(backend, task, solve, MARK_EARLIER_RUNS))
    assert "3/3 checks passed" in output or "checks passed: reward 1.0" in output, output


#: Special files the agent leaves in /app beside its right answer (as root: the agent's user).
SPECIAL_FILES = (
    "cd /app && mkfifo pipe && ln -s /nonexistent dangling && "
    "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"/app/sock\")' && "
    "(mknod zero c 1 5 2>/dev/null || true) && ls -la /app"
)


async def test_special_files_in_app_are_skipped(backend: SandboxBackend, tmp_path: Path) -> None:
    """A FIFO, a socket, a dangling link (and a device node, where the sandbox lets root make
    one) in /app: the checker's copy of /app skips them (never opening one: a FIFO would block
    it) and the right answer still passes."""
    task, solve = _task(tmp_path)
    _passed(await play(backend, task, solve, SPECIAL_FILES))


#: ledger.py made a fork bomb (every process forks while it can) or a memory hog spread over
#: a tree of eight processes (each touching 64 MiB more at a time until it is killed).
EXHAUST = {
    "fork-bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    "memory-hog": (
        "import os\nfor _ in range(3):\n    os.fork()\nheld = []\nwhile True:\n"
        "    held.append(b'x' * (64 << 20))\n"
    ),
}


@pytest.mark.parametrize("attack", ["fork-bomb", "memory-hog"])
async def test_a_run_that_exhausts_the_sandbox_is_contained(
    backend: SandboxBackend, tmp_path: Path, attack: str
) -> None:
    """A fork bomb, or a memory hog over a tree of processes, in the agent's program: its
    runs fail (killed, or out of processes or memory: the sandbox's cgroup bounds the tree's
    memory, a run's tree is killed past ``MAX_PROCS`` processes), and the checker is unharmed:
    it writes its own verdict, reward 0, with its checks run."""
    task, _ = _task(tmp_path)
    script = f"cat > /app/ledger.py <<'EOF_EXHAUST'\n{EXHAUST[attack]}EOF_EXHAUST"
    episode = await play(backend, task, script)
    end = episode.end
    assert end.verifier is not None and end.status != "error", (
        f"{end.error_class}: {end.error_message}"
    )
    output = end.verifier.output
    assert episode.reward == 0.0, output[-3000:]
    assert re.search(r"\n0/\d+ checks passed: reward 0.0", output), output[
        -3000:
    ]  # its own verdict
