"""Hidden tests: parse_amount and split_evenly on random inputs (in a child process), and the
balances/settle commands on random expense files, compared with a reference model."""

import json
import os
import random
import subprocess
import sys
import tempfile
from decimal import Decimal

CHILD = r'''
import json, sys
sys.path.insert(0, "/app")
from splitter.money import parse_amount
from splitter.split import split_evenly
data = json.load(open(sys.argv[1]))
out = {"parse": [], "split": []}
for text in data["parse"]:
    try:
        v = parse_amount(text)
        out["parse"].append(v if type(v) is int else repr(v))
    except Exception as e:
        out["parse"].append("raised " + type(e).__name__)
for amount, n in data["split"]:
    try:
        v = split_evenly(amount, n)
        out["split"].append([x if type(x) is int else repr(x) for x in v])
    except Exception as e:
        out["split"].append("raised " + type(e).__name__)
json.dump(out, open(sys.argv[2], "w"))
'''

NAMES = ["ana", "ben", "cleo", "dmitri", "eve", "femi", "gus"]


def ref_parse(text):
    return int(Decimal(text.strip().replace(",", "")) * 100)


def ref_split(amount, n):
    share, extra = divmod(amount, n)
    return [share + 1 if i < extra else share for i in range(n)]


def fmt(c):
    return f"{'-' if c < 0 else ''}{abs(c) // 100}.{abs(c) % 100:02d}"


def amount_text(rng):
    cents = rng.randint(1, 200_000)
    if rng.random() < 0.1:
        cents = -cents
    whole, frac = divmod(abs(cents), 100)
    sign = "-" if cents < 0 else ""
    r = rng.random()
    if r < 0.2 and frac == 0:
        text = f"{whole}"
    elif r < 0.35 and frac % 10 == 0:
        text = f"{whole}.{frac // 10}"
    else:
        text = f"{whole}.{frac:02d}"
    if whole >= 1000 and rng.random() < 0.5:
        text = f"{whole:,}" + text[len(str(whole)):]
    return sign + text, cents


def random_file(rng):
    group = rng.sample(NAMES, rng.randint(2, 6))
    lines = [f"# group: {' '.join(group)}"]
    expenses = []
    for k in range(rng.randint(1, 25)):
        payer = rng.choice(group)
        text, cents = amount_text(rng)
        names = [] if rng.random() < 0.4 else rng.sample(group, rng.randint(1, len(group)))
        lines.append(f"2024-04-{k % 28 + 1:02d} | {payer} | {text} | item {k} | {' '.join(names)}")
        if rng.random() < 0.1:
            lines.append("")
        expenses.append((payer, cents, names or group))
    return "\n".join(lines) + "\n", group, expenses


def ref_balances(group, expenses):
    bal = {n: 0 for n in group}
    for payer, cents, names in expenses:
        bal[payer] += cents
        for name, share in zip(names, ref_split(cents, len(names))):
            bal[name] -= share
    return bal


def ref_settle(bal):
    debt = {n: -b for n, b in bal.items() if b < 0}
    cred = {n: b for n, b in bal.items() if b > 0}
    out = []
    while debt and cred:
        d = min(debt, key=lambda n: (-debt[n], n))
        c = min(cred, key=lambda n: (-cred[n], n))
        a = min(debt[d], cred[c])
        out.append(f"{d} pays {c} {fmt(a)}")
        debt[d] -= a
        cred[c] -= a
        if not debt[d]:
            del debt[d]
        if not cred[c]:
            del cred[c]
    return "".join(line + "\n" for line in out)


def main():
    rng = random.Random(8086)
    failures = []
    parse_cases = ["4.35", "-4.35", "0.29", "1.15", "8.20", "19.99", "0.1", "1,250.00",
                   "  12.5 ", "1234567.89", "0.07", "-0.01", "100"]
    parse_cases += [amount_text(rng)[0] for _ in range(400)]
    split_cases = [[100, 3], [-100, 3], [5, 3], [-1, 3], [0, 4], [7, 1], [1, 7], [-7, 2]]
    split_cases += [[rng.randint(-10**6, 10**6), rng.randint(1, 12)] for _ in range(400)]
    with tempfile.TemporaryDirectory() as d:
        os.chown(d, 65534, 65534)  # the agent's code runs as nobody
        inp, outp = os.path.join(d, "in.json"), os.path.join(d, "out.json")
        with open(inp, "w") as f:
            json.dump({"parse": parse_cases, "split": split_cases}, f)
        proc = subprocess.run([sys.executable, "-I", "-c", CHILD, inp, outp], cwd="/app", user=65534, group=65534, extra_groups=[],
                              capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            print("FAIL: importing or calling the package failed:\n" + proc.stderr[-2000:])
            return 1
        with open(outp) as f:
            got = json.load(f)
        for text, v in zip(parse_cases, got["parse"]):
            if v != ref_parse(text):
                failures.append(f"parse_amount({text!r}) = {v}, expected {ref_parse(text)}")
        for (a, n), v in zip(split_cases, got["split"]):
            if v != ref_split(a, n):
                failures.append(f"split_evenly({a}, {n}) = {v}, expected {ref_split(a, n)}")
        for k in range(25):
            text, group, expenses = random_file(rng)
            path = os.path.join(d, f"expenses_{k}.txt")
            with open(path, "w") as f:
                f.write(text)
            bal = ref_balances(group, expenses)
            want = {
                "balances": "".join(f"{n:<12}{fmt(bal[n]):>12}\n" for n in sorted(bal))
                + f"{'(sum)':<12}{fmt(sum(bal.values())):>12}\n",
                "settle": ref_settle(bal),
            }
            for cmd in ("balances", "settle"):
                proc = subprocess.run([sys.executable, "-E", "-s", "-m", "splitter", cmd, path],
                                      cwd="/app", user=65534, group=65534, extra_groups=[], capture_output=True, text=True, timeout=30)
                if proc.returncode != 0 or proc.stdout != want[cmd]:
                    failures.append(f"`{cmd}` on file {k}:\n{text}\ngot:\n{proc.stdout}"
                                    f"{proc.stderr[-500:]}\nexpected:\n{want[cmd]}")
    for f in failures[:6]:
        print("FAIL", f)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
