"""edit-distance: the cheapest way to correct a scanned string into a catalogue entry, under
per-task operation costs (dynamic programming).

Easy: weighted insert / delete / substitute costs (insert and delete differ; a substitution may
cost more than a delete plus an insert), including the empty-string borders. Medium adds a
cheap case-only substitution and the transposition of two adjacent characters (optimal string
alignment), on longer strings under a CPU bar. Hard also asks for an optimal edit script, which
the checker applies to the input and prices itself: a valid but costlier script fails.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from palaestra.tasks import outcomes
from palaestra.tasks.generators import family
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

_NAMES = [
    ("ocr_fix.py", "correction_cost", "correction_script"),
    ("fuzzy.py", "edit_cost", "edit_script"),
    ("reconcile.py", "match_cost", "repair_steps"),
    ("sku_match.py", "distance", "edit_steps"),
]

# The reference: COST_* placeholders are replaced by the task's costs (None: not offered).
_RIGHT = '''"""Cost of correcting scanned codes into catalogue entries."""

INS, DEL, SUB, CASE, SWAP = COSTS


def _sub(x, y):
    if x == y:
        return 0
    if CASE is not None and x.lower() == y.lower():
        return CASE
    return SUB


def _table(a, b):
    n, m = len(a), len(b)
    d = [[j * INS for j in range(m + 1)]]
    for i in range(1, n + 1):
        ai, up = a[i - 1], d[i - 1]
        row = [i * DEL] + [0] * m
        for j in range(1, m + 1):
            bj = b[j - 1]
            best = up[j - 1] + _sub(ai, bj)
            if up[j] + DEL < best:
                best = up[j] + DEL
            if row[j - 1] + INS < best:
                best = row[j - 1] + INS
            if SWAP is not None and i > 1 and j > 1 and ai == b[j - 2] and a[i - 2] == bj:
                best = min(best, d[i - 2][j - 2] + SWAP)
            row[j] = best
        d.append(row)
    return d


def COST_FN(a, b):
    return _table(a, b)[len(a)][len(b)]


def SCRIPT_FN(a, b):
    d = _table(a, b)
    i, j, ops = len(a), len(b), []
    while i or j:
        here = d[i][j]
        if i and j and here == d[i - 1][j - 1] + _sub(a[i - 1], b[j - 1]):
            ops.append(["keep"] if a[i - 1] == b[j - 1] else ["sub", b[j - 1]])
            i, j = i - 1, j - 1
        elif (SWAP is not None and i > 1 and j > 1 and a[i - 1] == b[j - 2]
              and a[i - 2] == b[j - 1] and here == d[i - 2][j - 2] + SWAP):
            ops.append(["swap"])
            i, j = i - 2, j - 2
        elif i and here == d[i - 1][j] + DEL:
            ops.append(["del"])
            i -= 1
        else:
            ops.append(["ins", b[j - 1]])
            j -= 1
    ops.reverse()
    return ops
'''


def _variant(costs: tuple, names: tuple, *, script: bool, body: str = _RIGHT) -> str:
    _, cost_fn, script_fn = names
    src = body.replace("COSTS", repr(costs)).replace("COST_FN", cost_fn)
    if script:
        return src.replace("SCRIPT_FN", script_fn)
    return src[: src.index("\n\ndef SCRIPT_FN")] + "\n"


# Classic Levenshtein: every operation costs 1.
_UNIT = _RIGHT.replace(
    "INS, DEL, SUB, CASE, SWAP = COSTS", "INS = DEL = SUB = 1\nCASE = SWAP = None"
)
# The borders of the table count operations, not their cost.
_BORDERS = _RIGHT.replace("[j * INS for j", "[j for j").replace("[i * DEL] + [0]", "[i] + [0]")
# Insert and delete costs swapped (the direction of the correction read backwards).
_SWAPPED = _RIGHT.replace("INS, DEL, SUB, CASE, SWAP = COSTS", "DEL, INS, SUB, CASE, SWAP = COSTS")
# No transposition.
_NO_SWAP = _RIGHT.replace(
    "INS, DEL, SUB, CASE, SWAP = COSTS", "INS, DEL, SUB, CASE, SWAP = COSTS\nSWAP = None"
)
# A case-only change priced as any substitution.
_NO_CASE = _RIGHT.replace(
    "INS, DEL, SUB, CASE, SWAP = COSTS", "INS, DEL, SUB, CASE, SWAP = COSTS\nCASE = None"
)
# Right cost, but the script deletes everything and types the target.
_WIPE_SCRIPT = _RIGHT[: _RIGHT.index("def SCRIPT_FN")] + (
    """def SCRIPT_FN(a, b):
    return [["del"] for _ in a] + [["ins", c] for c in b]
"""
)


def _costs(rng, tier: str) -> tuple:
    ins = rng.randrange(2, 6)
    dele = rng.choice([c for c in range(1, 7) if c != ins])
    sub = rng.randrange(2, ins + dele + 3)
    if tier == "easy":
        return (ins, dele, sub, None, None)
    case = 1
    sub = max(sub, 3)
    swap = rng.randrange(1, min(sub, ins + dele))
    return (ins, dele, sub, case, swap)


@family(
    "edit-distance",
    category="algorithms",
    summary="Weighted edit distance under per-task costs; case changes and transpositions "
    "(medium), an optimal edit script checked by applying it (hard)",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    names = rng.choice(_NAMES)
    module, cost_fn, script_fn = names
    tier = spec.tier
    costs = _costs(rng, tier)
    ins, dele, sub, case, swap = costs
    script = tier == "hard"
    big_len = spec.iscale(200, 500)
    secret = rng.randrange(2**31)

    ns: dict = {}
    exec(compile(_variant(costs, names, script=True), "<reference>", "exec"), ns)
    examples = [("KB-1041", "KB-1014"), ("", "AX"), ("wrench", "Wrench-9"), ("MXL", "")]
    ex_lines = "\n".join(
        f">>> {cost_fn}({json.dumps(a)}, {json.dumps(b)})\n{ns[cost_fn](a, b)}" for a, b in examples
    )
    ops = [
        f"- insert one character: **{ins}**",
        f"- delete one character: **{dele}**",
        f"- replace one character by a different one: **{sub}**",
    ]
    if case is not None:
        ops[2] = (
            f"- replace one letter by the same letter in the other case (`a` <-> `A`): **{case}**"
        )
        ops.append(f"- replace one character by any other different character: **{sub}**")
        ops.append(
            f"- swap two adjacent characters (`ab` -> `ba`): **{swap}**; a swapped pair is "
            "final: neither of its characters may be edited again, and no other edit may "
            "happen between them (the restricted, 'optimal string alignment' rule)"
        )
    script_text = ""
    if script:
        script_text = f"""
Also implement `{script_fn}(scanned, entry)`: an optimal sequence of operations turning
`scanned` into `entry`, as a list of JSON-able steps applied left to right with a cursor that
starts before the first character of `scanned`:

- `["keep"]`: copy the character under the cursor, move past it (cost 0);
- `["sub", c]`: write `c` instead of the character under the cursor, move past it (priced as a
  replacement, by case as above);
- `["del"]`: drop the character under the cursor, move past it;
- `["ins", c]`: write `c`, the cursor does not move;
- `["swap"]`: write the next two characters in the other order, move past both.

The script must consume all of `scanned` and produce exactly `entry`, and its total cost must
equal `{cost_fn}(scanned, entry)`. When several scripts are optimal, any of them is accepted.
"""
    instruction = f"""\
# Match scanned product codes against the catalogue

Warehouse labels are scanned with OCR, and we match each scanned code to the catalogue entry
that is cheapest to correct it into. Implement `{cost_fn}(scanned, entry)` in `/app/{module}`
(it raises `NotImplementedError` now): the minimum total cost of a sequence of operations that
turns the string `scanned` into the string `entry`. The operations and their costs:

{chr(10).join(ops)}

Strings are ASCII (letters, digits, `-`, `.`, `/`) and may be empty. Codes can be up to
{big_len} characters long; a call must finish within a second or two for that length.
{script_text}
Examples:

```python
{ex_lines}
```

Only the standard library is available; keep the module path and function names.
"""
    stub = (
        '"""Cost of correcting scanned codes into catalogue entries."""\n\n\n'
        f"def {cost_fn}(scanned, entry):\n    raise NotImplementedError\n"
    )
    if script:
        stub += f"\n\ndef {script_fn}(scanned, entry):\n    raise NotImplementedError\n"

    wrong = {
        "unit-costs": _variant(costs, names, script=script, body=_UNIT),
        "unscaled-borders": _variant(costs, names, script=script, body=_BORDERS),
        "insert-delete-swapped": _variant(costs, names, script=script, body=_SWAPPED),
    }
    if tier != "easy":
        wrong["no-transposition"] = _variant(costs, names, script=script, body=_NO_SWAP)
        wrong["case-as-substitution"] = _variant(costs, names, script=script, body=_NO_CASE)
    if script:
        wrong["delete-then-insert-script"] = _variant(costs, names, script=True, body=_WIPE_SCRIPT)
    return hs.task(
        instruction=instruction,
        workspace={module: stub},
        tests=_tests(names, costs, ns[cost_fn], script, big_len, secret),
        answer_path=module,
        reference=_variant(costs, names, script=script),
        wrongs=wrong,
        note="DP table, backtracked",
        tags=("python", "dynamic-programming", "strings"),
        verifier_timeout_sec=240.0,
        reward_outcomes=outcomes.GRADED + outcomes.ASSERTIONS,
    )


_ALPHABET = "abcdeABCDE0123-./"
_PAIRS = [
    ["", ""],
    ["", "abc"],
    ["abcd", ""],
    ["a", "A"],
    ["ab", "ba"],
    ["abc", "abc"],
    ["xyz", "abc"],
    ["ab", "b"],
    ["b", "ab"],
    ["0-9", "09-"],
    ["aBc", "AbC"],
]
#: The script check, shipped in tests/: the answer's script applied and priced there.
_SCRIPT_CHECK = Path(__file__).with_name("_edit_script.py")


def _draws(secret: int, big_len: int) -> tuple[list, list[str]]:
    """The test's string pairs and its large pair, drawn from ``secret``."""
    rng = random.Random(secret)

    def rand_code(n):
        return "".join(rng.choice(_ALPHABET) for _ in range(n))

    def mutate(s, edits):
        s = list(s)
        for _ in range(edits):
            op = rng.randrange(5)
            k = rng.randrange(len(s) + 1)
            if op == 0:
                s.insert(k, rng.choice(_ALPHABET))
            elif op == 1 and k < len(s):
                del s[k]
            elif op == 2 and k < len(s):
                s[k] = rng.choice(_ALPHABET)
            elif op == 3 and k < len(s):
                s[k] = s[k].swapcase()
            elif op == 4 and k + 1 < len(s):
                s[k], s[k + 1] = s[k + 1], s[k]
        return "".join(s)

    pairs = list(_PAIRS)
    for _ in range(40):
        base = rand_code(rng.randrange(1, 14))
        pairs.append([base, mutate(base, rng.randrange(1, 5))])
    for _ in range(8):
        pairs.append([rand_code(rng.randrange(0, 9)), rand_code(rng.randrange(0, 9))])
    big_a = rand_code(big_len)
    return pairs, [big_a, mutate(big_a, big_len // 4)]


def _tests(names, costs, reference, script: bool, big_len: int, secret: int) -> dict:
    """The pairs, the large pair under 3 s of CPU and (hard) scripts under 4 s, priced by the
    checker; the reference's costs (run now) are the expected values."""
    module, cost_fn, script_fn = names
    pairs, (big_a, big_b) = _draws(secret, big_len)
    cases = [hs.Case(f"{cost_fn}({a!r}, {b!r})", want=reference(a, b)) for a, b in pairs]
    cases.append(
        hs.Case(
            f"{len(big_a)}- and {len(big_b)}-character codes within the time bar",
            want=reference(big_a, big_b),
        )
    )
    each = f"from {module[:-3]} import {{fn}}\nemit([{{fn}}(a, b) for a, b in INPUT])"
    calls = [
        hs.python_call(each.format(fn=cost_fn), pairs, cases=len(pairs)),
        hs.python_call(
            f"from {module[:-3]} import {cost_fn}\nemit([{cost_fn}(*INPUT)])",
            [big_a, big_b],
            cases=1,
            cpu=3,
        ),
    ]
    if script:
        script_pairs = pairs[:30] + [[big_a[:120], big_b[:130]]]
        cases += [
            hs.Case(f"{script_fn}({a[:20]!r}, {b[:20]!r})", want=[a, b, reference(a, b)])
            for a, b in script_pairs
        ]
        priced = hs.compare("function", module="edit_script", fn="priced", costs=list(costs))
        calls.append(hs.python_call(each.format(fn=script_fn), script_pairs, cpu=4, compare=priced))
    return hs.tests(
        answer=hs.python_calls(*calls, compile=[f"/app/{module}"]),
        cases=cases,
        compare=hs.compare("equal"),
        limits=hs.limits(timeout=60),
        kind="assert",
        modules={"edit_script.py": _SCRIPT_CHECK.read_text()},
        timeout=200,
    )
