"""glob-match: shell-style glob matching for a deploy tool's file filters (string algorithms).

Easy: ``?``, ``*`` and character classes (``[a-f0-9]``, ``[!...]``) over file names, with a
pattern built to make naive backtracking blow up (a polynomial matcher is needed). Medium makes
``/`` special: ``*``, ``?`` and classes never match it and a ``**`` segment matches zero or more
directories. Hard adds backslash escapes and a gitignore-style filter (``!`` re-includes, the
last matching pattern wins).
"""

from __future__ import annotations

import json
import random

from palaestra.tasks.generators import family
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

_NAMES = [
    ("globber.py", "glob_match", "ignored_paths"),
    ("deploy_filter.py", "matches", "excluded"),
    ("pathmatch.py", "path_matches", "filter_ignored"),
    ("syncrules.py", "rule_matches", "skipped_paths"),
]

_RIGHT = r'''"""Glob matching for the deploy tool's file filters."""

SEP, ESCAPES = FLAGS


def _tokens(p):
    toks, i = [], 0
    while i < len(p):
        c = p[i]
        if ESCAPES and c == "\\" and i + 1 < len(p):
            toks.append(("lit", p[i + 1]))
            i += 2
        elif c == "*":
            j = i
            while j < len(p) and p[j] == "*":
                j += 1
            whole = (i == 0 or p[i - 1] == "/") and (j == len(p) or p[j] == "/")
            if SEP and j - i == 2 and whole:
                toks.append(("all",) if j == len(p) else ("dirs",))
                i = j if j == len(p) else j + 1
            else:
                toks.append(("star",))
                i = j
        elif c == "?":
            toks.append(("any",))
            i += 1
        elif c == "[":
            neg = p[i + 1 : i + 2] == "!"
            start = i + 2 if neg else i + 1
            end = p.find("]", start + 1)
            if end == -1:
                toks.append(("lit", c))
                i += 1
                continue
            body, ranges, k = p[start:end], [], 0
            while k < len(body):
                if k + 2 < len(body) and body[k + 1] == "-":
                    ranges.append((body[k], body[k + 2]))
                    k += 3
                else:
                    ranges.append((body[k], body[k]))
                    k += 1
            toks.append(("class", neg, ranges))
            i = end + 1
        else:
            toks.append(("lit", c))
            i += 1
    return toks


def _one(tok, c):
    kind = tok[0]
    if kind == "lit":
        return c == tok[1]
    if c == SEP:
        return False
    if kind == "any":
        return True
    return any(lo <= c <= hi for lo, hi in tok[2]) != tok[1]


def MATCH_FN(pattern, path):
    n = len(path)
    nxt = [False] * n + [True]
    for tok in reversed(_tokens(pattern)):
        cur = [False] * (n + 1)
        kind = tok[0]
        if kind == "star":
            for j in range(n, -1, -1):
                cur[j] = nxt[j] or (j < n and path[j] != SEP and cur[j + 1])
        elif kind == "dirs":
            acc = False
            for j in range(n, -1, -1):
                if j < n and path[j] == "/" and nxt[j + 1]:
                    acc = True
                cur[j] = nxt[j] or acc
        elif kind == "all":
            acc = False
            for j in range(n, -1, -1):
                acc = acc or nxt[j]
                cur[j] = acc
        else:
            for j in range(n):
                cur[j] = nxt[j + 1] and _one(tok, path[j])
        nxt = cur
    return nxt[0]


def FILTER_FN(patterns, paths):
    out = []
    for path in paths:
        ignored = False
        for pattern in patterns:
            negated = pattern.startswith("!")
            if MATCH_FN(pattern[1:] if negated else pattern, path):
                ignored = not negated
        if ignored:
            out.append(path)
    return out
'''

# Plain recursive backtracking: right answers, exponential time on many stars.
_BACKTRACK = _RIGHT[: _RIGHT.index("def MATCH_FN")] + (
    """def _bt(toks, i, s, j):
    if i == len(toks):
        return j == len(s)
    kind = toks[i][0]
    if kind in ("star", "all"):
        k = j
        while True:
            if _bt(toks, i + 1, s, k):
                return True
            if k == len(s) or (kind == "star" and s[k] == SEP):
                return False
            k += 1
    if kind == "dirs":
        return any(_bt(toks, i + 1, s, k) for k in range(j, len(s) + 1)
                   if k == j or s[k - 1] == "/")
    return j < len(s) and _one(toks[i], s[j]) and _bt(toks, i + 1, s, j + 1)


def MATCH_FN(pattern, path):
    return _bt(_tokens(pattern), 0, path, 0)
"""
    + _RIGHT[_RIGHT.index("\n\ndef FILTER_FN") :]
)
# `?` also matches nothing.
_QUESTION_OPTIONAL = _RIGHT.replace(
    "            for j in range(n):\n                cur[j] = nxt[j + 1] and _one(tok, path[j])",
    """            for j in range(n + 1):
                cur[j] = (j < n and nxt[j + 1] and _one(tok, path[j])) or (
                    kind == "any" and nxt[j]
                )""",
)
# `[!...]` read as a class that contains `!`.
_NO_NEGATION = _RIGHT.replace('neg = p[i + 1 : i + 2] == "!"', "neg = False")
# A star stops at the first place where the rest of the pattern could start (no backtracking).
_FIRST_FIT = _RIGHT[: _RIGHT.index("def MATCH_FN")] + (
    """def MATCH_FN(pattern, path):
    toks, j = _tokens(pattern), 0
    for i, tok in enumerate(toks):
        if tok[0] in ("star", "dirs", "all"):
            rest = toks[i + 1 :]
            if not rest:
                return tok[0] != "star" or not SEP or SEP not in path[j:]
            if rest[0][0] not in ("lit", "any", "class"):
                continue
            while j < len(path) and not _one(rest[0], path[j]):
                if tok[0] == "star" and path[j] == SEP:
                    return False
                j += 1
        elif j < len(path) and _one(tok, path[j]):
            j += 1
        else:
            return False
    return j == len(path)
"""
    + _RIGHT[_RIGHT.index("\n\ndef FILTER_FN") :]
)
# `*` matches `/` too (what fnmatch does).
_STAR_CROSSES = _RIGHT.replace("path[j] != SEP and cur[j + 1]", "cur[j + 1]")
# `a/**/b` needs at least one directory between a and b.
_GLOBSTAR_ONE = _RIGHT.replace("cur[j] = nxt[j] or acc", "cur[j] = acc")
# Backslash is a literal character.
_NO_ESCAPES = _RIGHT.replace("SEP, ESCAPES = FLAGS", "SEP, ESCAPES = FLAGS\nESCAPES = False")
# The first matching pattern decides.
_FIRST_WINS = _RIGHT.replace(
    "                ignored = not negated\n",
    "                ignored = not negated\n                break\n",
)


def _variant(body: str, names: tuple, sep: bool, escapes: bool, filt: bool) -> str:
    _, match_fn, filter_fn = names
    src = body.replace("FLAGS", repr(("/" if sep else None, escapes)))
    if not filt:
        src = src[: src.index("\n\ndef FILTER_FN")] + "\n"
    return src.replace("MATCH_FN", match_fn).replace("FILTER_FN", filter_fn)


@family(
    "glob-match",
    category="algorithms",
    summary="Glob matching without exponential backtracking; directory-aware ** (medium), "
    "escapes and an ignore-file filter (hard)",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    names = rng.choice(_NAMES)
    module, match_fn, filter_fn = names
    tier = spec.tier
    sep, escapes, filt = tier != "easy", tier == "hard", tier == "hard"
    stars = spec.iscale(4, 10)
    long_len = spec.iscale(40, 200)
    secret = rng.randrange(2**31)

    ns: dict = {}
    exec(compile(_variant(_RIGHT, names, sep, escapes, filt), "<reference>", "exec"), ns)
    if sep:
        examples = [("src/*.py", "src/app.py"), ("src/*.py", "src/pkg/app.py"),
                    ("src/**/*.py", "src/app.py"), ("src/**/*.py", "src/pkg/sub/app.py"),
                    ("**/test_?.py", "tests/unit/test_a.py"), ("*", "docs/index.md")]  # fmt: skip
    else:
        examples = [("*.py", "app.py"), ("report-??.csv", "report-7.csv"),
                    ("[!.]*", ".env"), ("img_[0-9][0-9].png", "img_42.png"),
                    ("*a*b", "xaybzb")]  # fmt: skip
    if escapes:
        examples.append(("notes\\*.txt", "notes*.txt"))
    ex_lines = "\n".join(
        f">>> {match_fn}({json.dumps(p)}, {json.dumps(s)})\n{ns[match_fn](p, s)}"
        for p, s in examples
    )
    rules = [
        "`?` matches exactly one character.",
        "`*` matches any sequence of characters, including the empty one.",
        "`[...]` matches one character from a set of characters and ranges (`[abc]`, "
        "`[a-f0-9_]`); `[!...]` matches one character **not** in the set. A `[` without a "
        "closing `]` later in the pattern is a literal `[`.",
        "Every other character matches itself (case-sensitive).",
        "The whole path must match, not a part of it.",
    ]
    if sep:
        rules[1:1] = [
            "Paths are `/`-separated (`src/pkg/app.py`). `?`, `*` and `[...]` never match a `/`.",
            "A pattern segment that is exactly `**` (between slashes, or at either end) matches "
            "zero or more whole directories: `a/**/b` matches `a/b`, `a/x/b` and `a/x/y/b`; "
            "`**/b` matches `b` and `x/y/b`; a trailing `a/**` matches everything inside `a/`. "
            "Two stars inside a segment (`a**b`) act like one `*`.",
        ]
    if escapes:
        rules.append(
            "A backslash makes the next character literal (`\\*` matches `*`, `\\\\` matches a "
            "backslash)."
        )
    filter_text = ""
    if filt:
        filter_text = f"""
Also implement `{filter_fn}(patterns, paths)`, the deploy ignore list: `patterns` is a list of
globs applied in order; a pattern starting with `!` re-includes what it matches (the rest of it
is the glob). For each path, the **last** pattern that matches it decides: ignored, or
re-included by a `!` pattern; a path no pattern matches is kept. Return the ignored paths, in
their input order.
"""
    instruction = f"""\
# File filters for the deploy tool

Our deploy tool selects files with shell-style glob patterns. Implement `{match_fn}(pattern,
path)` in `/app/{module}` (it raises `NotImplementedError` now), returning `True` when the glob
`pattern` matches the string `path`:

{chr(10).join("- " + r for r in rules)}
{filter_text}
Patterns can hold {stars} or more stars and paths {long_len} or more characters; a call must
stay fast on those too (patterns like `*a*a*a*b` are where simple backtracking takes forever).
Do not use `fnmatch`, `glob` or `re`; only the standard library is available. Keep the module
path and function names.

```python
{ex_lines}
```
"""
    stub = f'"""Glob matching for the deploy tool\'s file filters."""\n\n\ndef {match_fn}(pattern, path):\n    raise NotImplementedError\n'
    if filt:
        stub += f"\n\ndef {filter_fn}(patterns, paths):\n    raise NotImplementedError\n"

    def var(body: str) -> str:
        return _variant(body, names, sep, escapes, filt)

    wrong = {
        "question-optional": var(_QUESTION_OPTIONAL),
        "class-negation-ignored": var(_NO_NEGATION),
        "star-first-fit": var(_FIRST_FIT),
    }
    if tier != "easy":
        wrong["backtracking"] = var(_BACKTRACK)
        wrong["star-crosses-slash"] = var(_STAR_CROSSES)
        wrong["globstar-needs-a-directory"] = var(_GLOBSTAR_ONE)
    if tier == "hard":
        wrong["no-escapes"] = var(_NO_ESCAPES)
        wrong["first-match-wins"] = var(_FIRST_WINS)
    return hs.task(
        instruction=instruction,
        workspace={module: stub},
        tests=_tests(names, ns, tier, stars, long_len, secret),
        answer_path=module,
        reference=var(_RIGHT),
        wrongs=wrong,
        note="token DP",
        tags=("python", "strings", "dynamic-programming"),
        verifier_timeout_sec=240.0,
    )


_CHARS = "abcxyz019._-"
_PAIRS = [
    ["a?c", "ac"],
    ["a?c", "abc"],
    ["[!a]b", "ab"],
    ["[!a]b", "xb"],
    ["*a", "aba"],
    ["*a*b", "xaybzb"],
    ["*", ""],
    ["?", ""],
    ["[a-c]x", "bx"],
    ["[a-c]x", "dx"],
    ["[ab", "[ab"],
    ["a*b*c", "abc"],
    ["*.txt", "a.txt.bak"],
    ["x*", "x"],
]
_SLASH_PAIRS = [
    ["*.py", "src/x.py"],
    ["src/*", "src/a/b"],
    ["a/**/b", "a/b"],
    ["a/**/b", "a/x/y/b"],
    ["**/b", "b"],
    ["**/b", "x/b"],
    ["a/**", "a/x/y"],
    ["a/?", "a//"],
    ["a**b", "a/b"],
    ["a/[!x]", "a//"],
    ["**", "a/b"],
    ["a/**/b", "a/xb"],
]
_ESCAPE_PAIRS = [
    ["\\*.txt", "x.txt"],
    ["\\*.txt", "*.txt"],
    ["a\\?", "a?"],
    ["a\\?", "ab"],
    ["\\\\x", "\\x"],
    ["[\\]", "x"],
]


class _Draws:
    """The test's inputs, drawn from the task's secret (the order of draws is the test's)."""

    def __init__(self, secret: int, slash: bool, hard: bool) -> None:
        self.rng, self.slash, self.hard = random.Random(secret), slash, hard

    def word(self, lo: int = 1, hi: int = 7) -> str:
        return "".join(self.rng.choice(_CHARS) for _ in range(self.rng.randrange(lo, hi)))

    def path(self) -> str:
        if not self.slash:
            return self.word(1, 12)
        return "/".join(self.word(1, 6) for _ in range(self.rng.randrange(1, 5)))

    def char_class(self, c: str) -> str:
        rng = self.rng
        if rng.random() < 0.5:
            return "[" + rng.choice("ax0") + c + "]" if c not in "]!-\\" else c
        other = rng.choice([x for x in "bcz19" if x != c])
        return "[!" + other + "]" if c != "/" else c

    def pattern_from(self, path: str) -> str:
        """A pattern made to match ``path`` (mostly), by replacing pieces with wildcards."""
        rng, out, i = self.rng, [], 0
        while i < len(path):
            r = rng.random()
            c = path[i]
            if self.slash and c == "/" and r < 0.25:  # collapse the next directories into **
                j = path.find("/", i + 1)
                out.append("/**/")
                i = j + 1 if j != -1 and rng.random() < 0.5 else i + 1
                continue
            if c == "/":
                out.append(c)
            elif r < 0.15:
                out.append("?")
            elif r < 0.3:
                j = i + rng.randrange(0, 4)
                while i < j and i < len(path) and path[i] != "/":
                    i += 1
                out.append("*")
                continue
            elif r < 0.42:
                out.append(self.char_class(c))
            elif self.hard and r < 0.47 and c in "._":
                out.append("\\" + c)
            else:
                out.append(c)
            i += 1
        return "".join(out)

    def mutate(self, path: str) -> str:
        if not path:
            return "q"
        k = self.rng.randrange(len(path))
        if self.rng.random() < 0.5:
            return path[:k] + self.rng.choice(_CHARS) + path[k + 1 :]
        return path[:k] + path[k + 1 :]


def _tests(names, ns: dict, tier: str, stars: int, long_len: int, secret: int) -> dict:
    """Edge cases and patterns drawn from ``secret``, the reference's answers (run now) their
    expected values: the pairs (4 s of CPU), the many-star patterns (2 s), the filter lists."""
    module, match_fn, filter_fn = names
    match, slash, hard = ns[match_fn], tier != "easy", tier == "hard"
    d = _Draws(secret, slash, hard)
    pairs = _PAIRS + (_SLASH_PAIRS if slash else []) + (_ESCAPE_PAIRS if hard else [])
    for _ in range(60):
        path = d.path()
        pat = d.pattern_from(path)
        pairs.append([pat, path if d.rng.random() < 0.6 else d.mutate(path)])
    letter = d.rng.choice("abxyz")
    other = d.rng.choice([c for c in "019" if c != letter])
    hard_pat = ("*" + letter) * stars + "*" + other
    many = [
        [hard_pat, letter * long_len],
        [hard_pat, letter * long_len + other],
        [hard_pat, letter * (long_len // 2) + other + letter * (long_len // 2)],
    ]
    cases = [hs.Case(f"{match_fn}({p!r}, {s!r})", want=match(p, s)) for p, s in pairs]
    cases.append(
        hs.Case(
            f"{stars}-star patterns on {long_len}-character paths within the time bar",
            want=[match(p, s) for p, s in many],
        )
    )
    each = f"from {module[:-3]} import {{fn}}\nemit([{{fn}}(p, s) for p, s in INPUT])"
    calls = [
        hs.python_call(each.format(fn=match_fn), pairs, cases=len(pairs), cpu=4),
        hs.python_call(
            f"from {module[:-3]} import {match_fn}\nemit([[{match_fn}(p, s) for p, s in INPUT]])",
            many,
            cases=1,
            cpu=2,
        ),
    ]
    if hard:
        lists = []
        for _ in range(8):
            paths = [d.path() for _ in range(12)]
            patterns = []
            for _ in range(d.rng.randrange(2, 6)):
                pat = d.pattern_from(d.rng.choice(paths))
                patterns.append(("!" + pat) if d.rng.random() < 0.35 else pat)
            patterns.append(d.rng.choice(["*", "**", "*/**"]))
            patterns.append("!" + d.pattern_from(d.rng.choice(paths)))
            lists.append([patterns, paths])
        cases += [
            hs.Case(f"{filter_fn} list {i}", want=ns[filter_fn](patterns, paths))
            for i, (patterns, paths) in enumerate(lists)
        ]
        calls.append(hs.python_call(each.format(fn=filter_fn), lists, cpu=4))
    return hs.tests(
        answer=hs.python_calls(*calls),
        cases=cases,
        compare=hs.compare("equal"),
        limits=hs.limits(timeout=60),
        timeout=200,
    )
