"""A tiny pure-Python project in a git repository: the fast fixture of the synthesis tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

CORE = '''\
"""tinycalc: small helpers, each with tests."""


def clamp(value, low=0, high=10):
    if value < low:
        return low
    if value > high:
        return high
    return value


def total(items, start=0):
    result = start
    for item in items:
        result += item
    return result


def window(seq, size=2):
    if size <= 0:
        raise ValueError("size must be positive")
    return [seq[i : i + size] for i in range(len(seq) - size + 1)]


def safe_ratio(a, b):
    try:
        return a / b
    except ZeroDivisionError:
        return None


def is_even(n):
    return n % 2 == 0


def initials(name):
    parts = name.split()
    return "".join(part[0].upper() for part in parts if part)
'''

TESTS = """\
import pytest

from tinycalc.core import clamp, initials, is_even, safe_ratio, total, window


def test_clamp_inside():
    assert clamp(5) == 5


def test_clamp_low():
    assert clamp(-3) == 0


def test_clamp_high():
    assert clamp(42, high=20) == 20


def test_total():
    assert total([1, 2, 3]) == 6
    assert total([1, 2], start=10) == 13


def test_window():
    assert window([1, 2, 3]) == [[1, 2], [2, 3]]
    assert window([1, 2, 3], 3) == [[1, 2, 3]]


def test_window_rejects_zero():
    with pytest.raises(ValueError):
        window([1], 0)


def test_safe_ratio():
    assert safe_ratio(6, 3) == 2
    assert safe_ratio(1, 0) is None


def test_is_even():
    assert is_even(4) and not is_even(7)


def test_initials():
    assert initials("ada  lovelace") == "AL"


# ids such as "total-case3": the index follows the set's order, which follows the string hash,
# which PYTHONHASHSEED fixes (the baseline's and the verifier's are the same, 0); each helper
# has one, so every task's tests hold one
CALLS = {
    "clamp": ((15,), 10),
    "total": (([2, 3],), 5),
    "window": (([1, 2, 3],), [[1, 2], [2, 3]]),
    "safe_ratio": ((1, 4), 0.25),
    "is_even": ((3,), False),
    "initials": (("grace hopper",), "GH"),
}


@pytest.mark.parametrize("name,case", [(n, [CALLS[n]]) for n in set(CALLS)])
def test_each_helper(name, case):
    import tinycalc.core

    (args, want), = case
    assert getattr(tinycalc.core, name)(*args) == want
"""

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tinycalc"
version = "1.0"
"""


def make_project(root: Path, *, tests: bool = True, native: bool = False) -> Path:
    """Write and commit the project at ``root``; return it."""
    (root / "tinycalc").mkdir(parents=True)
    (root / "tinycalc" / "__init__.py").write_text("")
    (root / "tinycalc" / "core.py").write_text(CORE)
    (root / "pyproject.toml").write_text(PYPROJECT)
    if tests:
        (root / "tests").mkdir()
        (root / "tests" / "test_core.py").write_text(TESTS)
    if native:
        (root / "tinycalc" / "_speedups.c").write_text("int f(void) { return 0; }\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "tinycalc 1.0"], check=True)
    return root
