"""range-queries-c: a C program answering range-sum (and range-minimum, and point-update)
queries over an array of large integers.

Easy: sums only, over a modest array. Medium adds minimum queries and negative values on a larger
array. Hard adds point updates between queries and a large input under a CPU-time bar, so
recomputing each range is too slow (a segment or Fenwick tree is needed). In every tier values
reach 10^9 (sums overflow 32 bits) and a query's two bounds may come in either order. The
declarative hidden test builds the agent's ``main.c`` with gcc as ``nobody`` and compares its
output with a Python reference's on secret inputs (made at generation time; too large to ship,
made again in the checker from the seed, the reference deciding should they differ).
"""

from __future__ import annotations

import textwrap

from palaestra.tasks.generators import family
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators._toolchains import REWARD_OUTCOMES, C, stdin_tests
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.optimization._bench import DRAWS, apply_edits

_OPS = [("sum", "min", "set"), ("S", "M", "U"), ("total", "lowest", "assign"), ("Q", "L", "W")]

_ORACLE = """\
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long long *sum_t, *min_t;
static int size = 1;

static void pull(int i) {
    sum_t[i] = sum_t[2 * i] + sum_t[2 * i + 1];
    min_t[i] = min_t[2 * i] < min_t[2 * i + 1] ? min_t[2 * i] : min_t[2 * i + 1];
}

static void assign(int i, long long v) {
    i += size;
    sum_t[i] = v;
    min_t[i] = v;
    for (i >>= 1; i >= 1; i >>= 1) pull(i);
}

/* sum and minimum of a[l..r], 0-based, inclusive */
static void query(int l, int r, long long *s, long long *m) {
    long long sum = 0, mn = LLONG_MAX;
    for (l += size, r += size + 1; l < r; l >>= 1, r >>= 1) {
        if (l & 1) { sum += sum_t[l]; if (min_t[l] < mn) mn = min_t[l]; l++; }
        if (r & 1) { --r; sum += sum_t[r]; if (min_t[r] < mn) mn = min_t[r]; }
    }
    *s = sum;
    *m = mn;
}

int main(void) {
    int n, q;
    if (scanf("%d %d", &n, &q) != 2) return 1;
    while (size < n) size <<= 1;
    sum_t = calloc(2 * size, sizeof *sum_t);
    min_t = malloc(2 * size * sizeof *min_t);
    for (int i = 0; i < 2 * size; i++) min_t[i] = LLONG_MAX;
    for (int i = 0; i < n; i++) {
        if (scanf("%lld", &sum_t[size + i]) != 1) return 1;
        min_t[size + i] = sum_t[size + i];
    }
    for (int i = size - 1; i >= 1; i--) pull(i);
    char op[16];
    long long a, b;
    for (int k = 0; k < q && scanf("%15s %lld %lld", op, &a, &b) == 3; k++) {
        if (strcmp(op, "UPD") == 0) { assign((int)a - 1, b); continue; }
        int l = (int)a - 1, r = (int)b - 1;
        if (l > r) { int t = l; l = r; r = t; }
        long long s, m;
        query(l, r, &s, &m);
        printf("%lld\\n", strcmp(op, "SUM") == 0 ? s : m);
    }
    return 0;
}
"""

_STUB = """\
/* Range queries (see the task). Build: {build} */
#include <stdio.h>

int main(void) {{
    /* read the array and answer the queries */
    return 0;
}}
"""

# Python, at generation and in the checker (tests/program_inputs.py): the inputs and the reference
# answers. The hard tier's inputs are too large to ship and are made again from the secret at
# every verification: ``make_input`` draws them in bulk (``DRAWS``, put before this code) and
# formats them with one ``%`` each: about half the CPU of drawing and formatting them number by
# number (~70 ms a verification).
_CASES = r"""
from itertools import chain, repeat

OPS, N_RANGE, Q_RANGE, WITH_MIN, WITH_UPD, BIG, BAR = {params}
# a line's kind from a byte below 200 (WITH_UPD) or 20: 0 a query with b = a (10 % of the
# queries), 1 one with b within 40 of a (45 %), 2 one with b anywhere (45 %), 3 an update (35 %)
KINDS = [3] * 70 + [0] * 13 + [1] * 58 + [2] * 59 if WITH_UPD else [0] * 2 + [1] * 9 + [2] * 9


def within(n, a, d):
    # the d-th of 81 steps over the positions within 40 of a (fewer near the ends)
    lo = max(1, a - 40)
    return lo + d * (min(n, a + 40) - lo + 1) // 81


def make_input(rng, n, q):
    low = -10**9 if WITH_MIN else 0
    values = map(low.__add__, draw_below(rng, 10**9 + 1 - low, n))
    head = "{{}} {{}}\n".format(n, q) + " ".join(["%d"] * n) % tuple(values) + "\n"
    kind = draw_below(rng, len(KINDS), q).translate(bytes(KINDS).ljust(256, b"\0"))
    count = [kind.count(k) for k in range(4)]

    def positions(k):
        return list(map((1).__add__, draw_below(rng, n, count[k])))

    same, near, far, where = positions(0), positions(1), positions(2), positions(3)
    steps = draw_below(rng, 81, count[1])
    near_b = [a + d - 40 if 40 < a <= n - 40 else within(n, a, d) for a, d in zip(near, steps)]
    far_b = positions(2)
    news = map((-10**9).__add__, draw_below(rng, 2 * 10**9 + 1, count[3]))
    ops = iter(draw_picks(rng, [OPS[0]] + ([OPS[1]] if WITH_MIN else []), q - count[3]))

    def merged(*parts):  # the items of parts[k] in turn, at the lines of kind k
        its = [iter(part) for part in parts]
        return map(next, map(its.__getitem__, kind))

    cells = zip(
        merged(ops, ops, ops, repeat(OPS[2])),
        merged(same, near, far, where),
        merged(same, near_b, far_b, news),
    )
    return head + ("%s %d %d\n" * q) % tuple(chain.from_iterable(cells))


def make_cases(rng):
    cases = [("a one-element array", make_input(rng, 1, 6), None)]
    for k in range(3):
        cases.append(("random input {{}}".format(k + 1), make_input(rng, rng.randint(*N_RANGE), rng.randint(*Q_RANGE)), None))
    if BIG:
        cases.append(("{{}} values and queries within {{}}s of CPU".format(BIG, BAR), make_input(rng, BIG, BIG), BAR))
    return cases


_MADE = {{}}


def case_input(rng, index):
    # case index's input, made again in the checker (make_cases once a seed)
    key = rng.getstate()
    if key not in _MADE:
        _MADE[key] = make_cases(rng)
    return _MADE[key][index][1]


def expected(stdin):
    words = stdin.split()
    n, q = int(words[0]), int(words[1])
    size = 1
    while size < n:
        size *= 2
    big = float("inf")
    sums, mins = [0] * (2 * size), [big] * (2 * size)
    for i in range(n):
        sums[size + i] = mins[size + i] = int(words[2 + i])
    for i in range(size - 1, 0, -1):
        sums[i], mins[i] = sums[2 * i] + sums[2 * i + 1], min(mins[2 * i], mins[2 * i + 1])
    out, pos = [], 2 + n
    for _ in range(q):
        op, a, b = words[pos], int(words[pos + 1]), int(words[pos + 2])
        pos += 3
        if op == OPS[2]:
            i = size + a - 1
            sums[i] = mins[i] = b
            i //= 2
            while i:
                sums[i], mins[i] = sums[2 * i] + sums[2 * i + 1], min(mins[2 * i], mins[2 * i + 1])
                i //= 2
            continue
        l, r = min(a, b) - 1 + size, max(a, b) + size
        s, m = 0, big
        while l < r:
            if l & 1:
                s, m, l = s + sums[l], min(m, mins[l]), l + 1
            if r & 1:
                r -= 1
                s, m = s + sums[r], min(m, mins[r])
            l //= 2
            r //= 2
        out.append(str(s if op == OPS[0] else m))
    return "\n".join(out) + "\n"
"""


@family(
    "range-queries-c",
    category="algorithms",
    summary="C program: range sums, minima and point updates over 64-bit values (CPU bar)",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    sum_op, min_op, upd_op = rng.choice(_OPS)
    with_min, with_upd = spec.tier != "easy", spec.tier == "hard"
    n_max = spec.iscale(300, 6000)
    big = spec.iscale(20_000, 30_000) if with_upd else 0
    params = ((sum_op, min_op, upd_op), (2, n_max), (1, n_max), with_min, with_upd, big, 1)
    cases = DRAWS + _CASES.format(params=repr(params))
    oracle = _ORACLE.replace('"SUM"', f'"{sum_op}"').replace('"UPD"', f'"{upd_op}"')
    wrongs = {
        # 32-bit sums: wrap around once a range holds a few large values
        "int-sums": apply_edits(oracle, [("long long sum = 0,", "int sum = 0; long long")]),
        # the right bound read as exclusive
        "right-bound-exclusive": apply_edits(oracle, [("r += size + 1;", "r += size;")]),
        # bounds taken in the order given: a reversed query answers an empty range
        "bounds-not-ordered": apply_edits(
            oracle, [("if (l > r) { int t = l; l = r; r = t; }\n", "")]
        ),
    }
    if with_min:
        wrongs["min-starts-at-zero"] = apply_edits(oracle, [("mn = LLONG_MAX;", "mn = 0;")])
    if with_upd:
        wrongs["update-leaves-minimum"] = apply_edits(oracle, [("    min_t[i] = v;\n", "")])
    scope: dict = {}
    exec(cases, scope)
    example = scope["make_input"](rng, 8, 10)
    ops_doc = f"- `{sum_op} l r`: print the sum of the values at positions l..r\n"
    if with_min:
        ops_doc += f"- `{min_op} l r`: print the smallest value at positions l..r\n"
    if with_upd:
        ops_doc += f"- `{upd_op} i v`: set the value at position i to v (prints nothing)\n"
    bar = (
        f"\n        Inputs reach {big:,} values and {big:,} queries; the program must answer\n"
        "        them within 1 second of CPU time.\n"
        if big
        else ""
    )
    instruction = textwrap.dedent(
        f"""\
        # Range queries in C

        Write `/app/main.c`: a program that reads from standard input a line `n q`, a line of
        n integers (positions 1..n) and q query lines, and answers them on standard output,
        one line per answered query, in order:

        {ops_doc.replace(chr(10), chr(10) + "        ").rstrip()}

        Positions are 1-based and both bounds are inclusive; the two bounds of a query may come
        in either order (`{sum_op} 7 3` means positions 3..7). Values are between -10^9 and
        10^9, n is at most {max(n_max, big):,}.
        {bar}
        It is built with `{C.build_line}` (in /app) and run as
        `./prog`. Example input and output: `/app/examples/`. Only the C standard library is
        available.
        """
    )
    return hs.task(
        instruction=instruction,
        workspace={
            "main.c": _STUB.format(build=C.build_line),
            "examples/example.in": example,
            "examples/example.out": scope["expected"](example),
        },
        tests=stdin_tests(C, code=cases, secret=rng.randrange(2**31)),
        answer_path=C.source,
        reference=oracle,
        wrongs=wrongs,
        note="a segment tree",
        tags=("c", "algorithms", "segment-tree"),
        verifier_timeout_sec=420.0,
        reward_outcomes=REWARD_OUTCOMES,
        packages=C.packages,
    )
