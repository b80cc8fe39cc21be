"""Hidden test: analyze.py must print exactly what the original prints (the reference below is
an independent fast implementation) on small logs and on a large one, and its CPU time on the
large log must stay under a bar calibrated against the reference's CPU time in this run.

CPU time (not wall time) is measured, so a busy machine does not fail a correct solution; the
bar is enforced with RLIMIT_CPU so a slow program is stopped at the bar.
"""

import math
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, "/tests")
import gen_log  # noqa: E402


def become_subreaper():
    """Whatever the agent's program forks (orphans included) comes back to this process."""
    import ctypes

    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def end_the_tree():
    """Kill every process of nobody's (what the run left) and reap those that came back here:
    RUSAGE_CHILDREN then holds the CPU of the program's whole process tree, so a program that
    forks before each second of CPU (RLIMIT_CPU restarts at a fork) is counted whole."""
    for _ in range(1000):
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/status") as f:
                    if any(x.split()[1] == "65534" for x in f if x.startswith("Uid:")):
                        os.kill(int(pid), 9)
            except (OSError, ValueError, IndexError):
                pass
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.005)


def sealed(d):
    """Make ``d``'s inputs readable by the agent's program and writable by nothing it runs."""
    for name in os.listdir(d):
        os.chmod(os.path.join(d, name), 0o444)
    os.chmod(d, 0o755)


def alone(*paths):
    """Copies of ``paths`` (one case's inputs) in a new directory the agent's program may read
    and nothing it runs may write. The inputs' own directory is root's alone once the
    references ran: a run never sees another case's input (an untimed run would make the
    timed case's output, and leave it where a later run reads it)."""
    where = tempfile.mkdtemp()
    copies = []
    for path in paths:
        copies.append(os.path.join(where, os.path.basename(path)))
        with open(path, "rb") as src, open(copies[-1], "wb") as dst:
            dst.write(src.read())
    sealed(where)
    return copies


def run(argv, cpu_limit=None, wall_timeout=120, agent=False):
    def limit():
        if cpu_limit:
            soft = math.ceil(cpu_limit)
            resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        nobody = {"user": 65534, "group": 65534, "extra_groups": []} if agent else {}
        proc = subprocess.run(argv, cwd="/app", capture_output=True, timeout=wall_timeout,
                              preexec_fn=limit, **nobody)
    except subprocess.TimeoutExpired:
        proc = None
    if agent:
        end_the_tree()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return proc, cpu


def main():
    become_subreaper()
    with tempfile.TemporaryDirectory() as d:
        cases = []
        for seed, n, clients, timed in ((5, 3000, 400, False), (6, 8000, 900, False),
                                        (424242, 150_000, 50_000, True)):
            path = os.path.join(d, f"access_{seed}.log")
            gen_log.write(path, seed, n, clients)
            cases.append((f"{n} lines", path, timed))
        empty = os.path.join(d, "empty.log")
        with open(empty, "w") as f:
            f.write("garbage line\n\n")
        cases.insert(0, ("only malformed lines", empty, False))
        sealed(d)  # root's: no run of the agent's program can change a later case's input
        refs = []  # the reference's outputs and CPU first, before any agent code runs
        for label, path, timed in cases:
            ref, ref_cpu = run([sys.executable, "-I", "/tests/reference.py", path])
            assert ref is not None and ref.returncode == 0, ref and ref.stderr
            refs.append((ref, ref_cpu))
        os.chmod(d, 0o700)
        for (label, path, timed), (ref, ref_cpu) in zip(cases, refs):
            (path,) = alone(path)
            bar = max(3.0, 5 * ref_cpu) if timed else 60
            got, cpu = run([sys.executable, "-E", "-s", "/app/analyze.py", path], agent=True,
                           cpu_limit=bar, wall_timeout=4 * bar + 10)
            if got is None or got.returncode < 0 or (timed and cpu > bar):
                print(f"FAIL {label}: analyze.py used more than {bar:.1f} s of CPU "
                      f"(reference: {ref_cpu:.2f} s)")
                return 1
            if got.returncode != 0 or got.stdout != ref.stdout:
                a, b = got.stdout.splitlines(), ref.stdout.splitlines()
                i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                print(f"FAIL {label}: rc={got.returncode}; output differs at line {i + 1}: got "
                      f"{a[i] if i < len(a) else '<end>'!r}, expected "
                      f"{b[i] if i < len(b) else '<end>'!r} {got.stderr[-800:]!r}")
                return 1
            print(f"ok   {label}: {cpu:.2f} s CPU (reference {ref_cpu:.2f} s"
                  + (f", bar {bar:.1f} s)" if timed else ")"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
