"""Hidden test: the agent's report.py must print exactly what the original program prints on
a small and a large generated export, and on the large one stay within a CPU-time bar
calibrated against a reference implementation run here."""

import math
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, "/tests")
import gen_data  # noqa: E402

REFERENCE = r'''
import csv, sys
with open(sys.argv[1], newline="", encoding="utf-8") as f:
    orders = [(r["customer_id"], float(r["amount"])) for r in csv.DictReader(f)]
with open(sys.argv[2], newline="", encoding="utf-8") as f:
    customers = list(csv.DictReader(f))
first = {}
for idx, c in enumerate(customers):
    first.setdefault(c["id"], idx)
counts, totals = {}, {}
un_n, un_t = 0, 0.0
for cid, amount in orders:
    idx = first.get(cid)
    if idx is None:
        un_n += 1
        un_t += amount
    else:
        counts[idx] = counts.get(idx, 0) + 1
        totals[idx] = totals.get(idx, 0.0) + amount
out = [f"{c['id']}\t{c['name']}\t{counts[i]}\t{totals[i]:.2f}"
       for i, c in enumerate(customers) if i in counts]
if un_n:
    out.append(f"UNKNOWN\t-\t{un_n}\t{un_t:.2f}")
sys.stdout.write("\n".join(out) + "\n")
'''


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
    become_subreaper()
    with tempfile.TemporaryDirectory() as d:
        small = (os.path.join(d, "o_small.csv"), os.path.join(d, "c_small.csv"))
        gen_data.write(*small, seed=11, n_customers=400, n_orders=3000)
        big = (os.path.join(d, "o_big.csv"), os.path.join(d, "c_big.csv"))
        gen_data.write(*big, seed=12345, n_customers=20000, n_orders=80000)
        sealed(d)  # root's: no run of the agent's program can change a later case's input
        cases = []  # the reference's outputs and CPU first, before any agent code runs
        for label, (orders, customers), check_time in (("small", small, False),
                                                       ("large", big, True)):
            ref, ref_s = run([sys.executable, "-I", "-c", REFERENCE, orders, customers])
            assert ref is not None and ref.returncode == 0, ref and ref.stderr
            cases.append((label, (orders, customers), check_time, ref, ref_s))
        os.chmod(d, 0o700)
        for label, (orders, customers), check_time, ref, ref_s in cases:
            orders, customers = alone(orders, customers)
            bar = max(2.0, 10 * ref_s) if check_time else 60
            got, got_s = run([sys.executable, "-E", "-s", "/app/report.py", orders, customers], agent=True,
                             cpu_limit=bar, wall_timeout=4 * bar + 10)
            if got is None or got.returncode < 0 or got_s > bar:
                print(f"FAIL {label}: report.py used more than {bar:.1f} s of CPU "
                      f"(reference: {ref_s:.2f} s)")
                return 1
            if got.returncode != 0:
                print(f"FAIL {label}: report.py exited {got.returncode}: {got.stderr[-1500:]!r}")
                return 1
            if got.stdout != ref.stdout:
                a, b = got.stdout.splitlines(), ref.stdout.splitlines()
                i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                print(f"FAIL {label}: output differs at line {i + 1}: got "
                      f"{a[i] if i < len(a) else '<end>'!r}, expected {b[i] if i < len(b) else '<end>'!r}")
                return 1
            print(f"ok   {label}: identical output in {got_s:.2f} s CPU "
                  f"(reference {ref_s:.2f} s, bar {bar:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
