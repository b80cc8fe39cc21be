"""Attacks on the verify-time jail found after it merged (issue 29): each an episode of a real
task played by an agent that does not solve it, on every backend of the ``backend`` fixture.

* The reference's code is read by the agent's run: a family that runs its reference from a
  ``read_only_dir`` leaves it readable by nobody under ``/tmp`` while the agent's runs follow;
  a module that execs the reference's copy of itself on import answers as the reference does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from palaestra.sandbox import SandboxBackend
from palaestra.tasks.generators import generate
from palaestra.tasks.generators import write as write_generated
from tests.sandbox.test_hostile_rewards import assert_no_reward, play

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier

#: Appended to every module of /app: on import, exec the same-named file of any copy of the
#: package a checker left under /tmp (a reference's read-only directory) into this module.
STEAL_REFERENCE = r"""
def _steal_reference():
    import glob, os
    me = os.path.abspath(__file__)
    rel = os.path.relpath(me, "/app")
    for pattern in ("/tmp/*/", "/tmp/*/*/"):
        for cand in sorted(glob.glob(pattern + rel)):
            if os.path.abspath(cand) == me:
                continue
            try:
                with open(cand) as f:
                    exec(compile(f.read(), cand, "exec"), globals())
                return
            except Exception:
                pass


_steal_reference()
"""

STEAL_SCRIPT = (
    "for f in $(find /app -name '*.py' -not -path '*/tests/*'); do cat >> $f <<'EOF_STEAL'\n"
    f"{STEAL_REFERENCE}\nEOF_STEAL\ndone"
)


@pytest.mark.parametrize(
    ("family", "seed", "difficulty"),
    [("api-pagination", 1, 0.5), ("client-resilience", 1, 0.9), ("config-parser", 1, 0.5)],
)
async def test_reference_code_read_by_the_agent(
    backend: SandboxBackend, tmp_path: Path, family: str, seed: int, difficulty: float
) -> None:
    """The workspace's own (wrong) code, which execs the reference's copy of each module on
    import: the reference is out of reach of agent runs, and it scores 0."""
    task = write_generated(family, seed, difficulty, tmp_path / family)
    episode = await play(backend, task, STEAL_SCRIPT)
    assert_no_reward(episode)


#: Appended to log-split-io's program (the workspace's slow one): once it wrote OUT_DIR, a FIFO
#: beside its files (the checker would block on it), or each file made a link to the hidden
#: test's test.sh (the checker would read it, and print its first lines as the first difference).
PLANT_IN_OUT_DIR = {
    "fifo": 'os.mkfifo(os.path.join(sys.argv[2], "zz.log"))',
    "link": (
        "for n in os.listdir(sys.argv[2]):\n"
        "        os.unlink(os.path.join(sys.argv[2], n))\n"
        '        os.symlink("/tests/test.sh", os.path.join(sys.argv[2], n))'
    ),
}


@pytest.mark.parametrize("plant", sorted(PLANT_IN_OUT_DIR))
async def test_fifo_or_link_in_an_output_directory(
    backend: SandboxBackend, tmp_path: Path, plant: str
) -> None:
    """log-split-io reads the program's OUT_DIR: a FIFO there is a failed check, never a checker
    blocked until its alarm (an episode error, not a failure), and a link is never followed
    (the hidden test's text never reaches the log)."""
    task = write_generated("log-split-io", 1, 0.5, tmp_path / "log-split-io")
    program = next(n for n in generate("log-split-io", 1, 0.5).workspace if n.endswith(".py"))
    tail = f'\nif __name__ == "__main__" and len(sys.argv) == 3:\n    {PLANT_IN_OUT_DIR[plant]}\n'
    script = f"cat >> /app/{program} <<'EOF_PLANT'\n{tail}EOF_PLANT"
    episode = await play(backend, task, script)
    assert_no_reward(episode)
    assert episode.end.verifier is not None
    output = episode.end.verifier.output
    assert "checks passed: reward 0.0" in output, output[-2000:]  # not killed by its alarm
    assert "Hidden verifier" not in output  # test.sh's second line


#: After the right revenue.py: it is run by a wrapper that prints its CSV with every revenue
#: replaced by "nan" (a value no comparison within a tolerance may accept).
NAN_REVENUES = r"""
mv /app/revenue.py /app/revenue_real.py
cat > /app/revenue.py <<'EOF_NAN'
import csv, io, subprocess, sys
out = subprocess.run([sys.executable, "/app/revenue_real.py", *sys.argv[1:]],
                     capture_output=True, text=True).stdout
rows = list(csv.reader(io.StringIO(out)))
w = csv.writer(sys.stdout, lineterminator="\n")
w.writerow(rows[0])
for row in rows[1:]:
    w.writerow(row[:2] + ["nan"])
EOF_NAN
"""


async def test_nan_within_a_tolerance(backend: SandboxBackend, tmp_path: Path) -> None:
    """revenue-join-csv compares each revenue within 0.01: "nan" is no number within anything
    (``abs(nan - w) > tol`` is False, which let it pass)."""
    task = write_generated("revenue-join-csv", 1, 0.5, tmp_path / "revenue-join-csv")
    solve = generate("revenue-join-csv", 1, 0.5).solution["solve.sh"]
    assert isinstance(solve, str)
    episode = await play(backend, task, solve, NAN_REVENUES)
    assert_no_reward(episode)


#: The right report.py, made an unoptimised one (5 s of CPU a report), whose first, untimed run
#: (on the small input) also makes the large input's report, beside it, and leaves it where
#: runs may write (/dev/shm, else /tmp); the timed run prints what it left.
STASH_THE_LARGE_REPORT = r"""
cd /app && bash /solution/solve.sh && mv report.py report_fast.py
cat > report.py <<'EOF_STASH'
import os, subprocess, sys, time
orders, customers = sys.argv[1], sys.argv[2]
here = os.path.dirname(orders)
stashes = ["/dev/shm/.report-stash", "/tmp/.report-stash", "/var/tmp/.report-stash"]


def slow(o, c):
    start = time.process_time()
    while time.process_time() - start < 5:
        pass
    return subprocess.run([sys.executable, "/app/report_fast.py", o, c],
                          capture_output=True, text=True).stdout


if os.path.basename(orders) == "o_small.csv":
    big = slow(os.path.join(here, "o_big.csv"), os.path.join(here, "c_big.csv"))
    for stash in stashes:
        try:
            with open(stash, "w") as f:
                f.write(big)
        except OSError:
            pass
    sys.stdout.write(slow(orders, customers))
else:
    for stash in stashes:
        try:
            with open(stash) as f:
                sys.stdout.write(f.read())
                break
        except OSError:
            pass
    else:
        sys.stdout.write(slow(orders, customers))
EOF_STASH
"""


async def test_large_report_made_by_the_untimed_run(backend: SandboxBackend) -> None:
    """optimization-easy-order-report: the untimed small run sees the large input beside its
    own and leaves the large report in /dev/shm for the timed run: the work is over the large
    case's bar, wherever it was done."""
    from tests.tasks.starter.pack import LOADED_DIR
    from tests.tasks.starter.test_episodes import with_solution

    task = "optimization-easy-order-report"
    episode = await play(backend, LOADED_DIR / task, with_solution(STASH_THE_LARGE_REPORT, task))
    assert_no_reward(episode)
