"""Hidden test: smooth.py must match the original output on edge cases and on two large traces,
and stay within a CPU-time bar (calibrated against a reference run here) on the large ones."""

import math
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

REFERENCE = r'''
import bisect, sys
vals = []
for line in open(sys.argv[1]):
    line = line.strip()
    if line and not line.startswith("#"):
        vals.append(int(line))
k = int(sys.argv[2])
win = sorted(vals[:k - 1]) if k <= len(vals) else []
out = []
def half(t):
    return str(t // 2) if t % 2 == 0 else f"{t / 2:.1f}"
for end in range(k, len(vals) + 1):
    bisect.insort(win, vals[end - 1])
    out.append(half(2 * win[k // 2]) if k % 2 else half(win[k // 2 - 1] + win[k // 2]))
    del win[bisect.bisect_left(win, vals[end - k])]
sys.stdout.write("".join(s + "\n" for s in out))
'''


def trace(rng, n, spread):
    lines, v = ["# generated trace"], rng.randint(-spread, spread)
    for _ in range(n):
        v += rng.randint(-spread // 50 - 1, spread // 50 + 1)
        lines.append(str(v + (rng.choice([-1, 1]) * spread * 10 if rng.random() < 0.01 else 0)))
        r = rng.random()
        if r < 0.002:
            lines.append("")
        elif r < 0.003:
            lines.append("# recalibrated")
        elif r < 0.004:
            lines.append(f"  {rng.randint(-5, 5)}  ")
    return "\n".join(lines) + "\n"


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
    """Run argv; return (CompletedProcess or None on wall timeout, CPU seconds it used).

    CPU time (not wall time) is what is compared, so a busy machine does not fail a correct
    solution; RLIMIT_CPU stops a slow program at the bar."""
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
    return proc, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    rng = random.Random(60606)
    cases = [
        ("k=1", "5\n-3\n\n# c\n7\n", 1, False),
        ("k=n", "4\n1\n3\n2\n", 4, False),
        ("k>n", "4\n1\n3\n", 4, False),
        ("even negatives", "-3\n-4\n-10\n7\n+5\n-0\n", 2, False),
        ("even k=4", "1\n2\n3\n4\n5\n100\n-100\n6\n", 4, False),
        ("huge values", f"{10**12 + 1}\n{10**12 + 2}\n{-(10**12)}\n{10**12 + 7}\n", 2, False),
        ("random small odd", trace(rng, 500, 1000), 7, False),
        ("random small even", trace(rng, 500, 1000), 10, False),
        ("large odd", trace(rng, 200_000, 100_000), 2001, True),
        ("large even", trace(rng, 150_000, 100_000), 1000, True),
    ]
    become_subreaper()
    with tempfile.TemporaryDirectory() as d:
        for n, (label, text, k, timed) in enumerate(cases):
            with open(os.path.join(d, f"trace{n}.txt"), "w") as f:
                f.write(text)
        sealed(d)  # root's: no run of the agent's program can change a later case's input
        refs = []  # the reference's outputs and CPU first, before any agent code runs
        for n, (label, text, k, timed) in enumerate(cases):
            path = os.path.join(d, f"trace{n}.txt")
            ref, ref_s = run([sys.executable, "-I", "-c", REFERENCE, path, str(k)])
            assert ref is not None and ref.returncode == 0, ref and ref.stderr
            refs.append((path, ref, ref_s))
        os.chmod(d, 0o700)
        for (label, text, k, timed), (path, ref, ref_s) in zip(cases, refs):
            (path,) = alone(path)
            bar = max(2.0, 8 * ref_s) if timed else 30
            got, got_s = run([sys.executable, "-E", "-s", "/app/smooth.py", path, str(k)], agent=True,
                             cpu_limit=bar, wall_timeout=4 * bar + 10)
            if got is None or got.returncode < 0 or got_s > bar:
                print(f"FAIL {label}: smooth.py used more than {bar:.1f} s of CPU "
                      f"(reference: {ref_s:.2f} s)")
                return 1
            if got.returncode != 0 or got.stdout != ref.stdout:
                a, b = got.stdout.splitlines(), ref.stdout.splitlines()
                i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                print(f"FAIL {label}: rc={got.returncode}, output differs at line {i + 1}: got "
                      f"{a[i] if i < len(a) else '<end>'!r}, expected "
                      f"{b[i] if i < len(b) else '<end>'!r} {got.stderr[-500:]!r}")
                return 1
            print(f"ok   {label}: {got_s:.2f} s CPU (reference {ref_s:.2f} s"
                  + (f", bar {bar:.1f} s)" if timed else ")"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
