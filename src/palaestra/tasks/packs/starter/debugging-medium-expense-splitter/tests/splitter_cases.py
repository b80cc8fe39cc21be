"""The expense splitter's cases (from the test's fixed seed): amounts for parse_amount,
(amount, n) pairs for split_evenly, and expense files for the balances and settle commands,
with the reference model's expected results."""

import random
from decimal import Decimal

SEED = 8086


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


def all_cases():
    """(parse cases, split cases, [(file text, {"balances": report, "settle": report})])."""
    rng = random.Random(SEED)
    parse_cases = ["4.35", "-4.35", "0.29", "1.15", "8.20", "19.99", "0.1", "1,250.00",
                   "  12.5 ", "1234567.89", "0.07", "-0.01", "100"]
    parse_cases += [amount_text(rng)[0] for _ in range(400)]
    split_cases = [[100, 3], [-100, 3], [5, 3], [-1, 3], [0, 4], [7, 1], [1, 7], [-7, 2]]
    split_cases += [[rng.randint(-10**6, 10**6), rng.randint(1, 12)] for _ in range(400)]
    files = []
    for _ in range(25):
        text, group, expenses = random_file(rng)
        bal = ref_balances(group, expenses)
        want = {
            "balances": "".join(f"{n:<12}{fmt(bal[n]):>12}\n" for n in sorted(bal))
            + f"{'(sum)':<12}{fmt(sum(bal.values())):>12}\n",
            "settle": ref_settle(bal),
        }
        files.append((text, want))
    return parse_cases, split_cases, files
