"""The per-test outcome keys a task's ``test.sh`` may write into ``reward.json`` beside
``reward``, and how a task declares them.

A task declares the keys its verifier reports in ``task.toml``::

    [metadata]
    reward_outcomes = ["tests_total", "tests_passed", "tests_failed", "tests_errored",
                       "compile_error"]

The graded reward strategies (:mod:`palaestra.verify.strategies`) need some of them; a strategy
refuses a task that does not declare what it needs, rather than reading a missing key as 0.
"""

from __future__ import annotations

TESTS = ("tests_total", "tests_passed", "tests_failed", "tests_errored")
"""Test cases run, passed, failed (ran, wrong answer) and errored (crashed, timed out)."""
COMPILE = ("compile_error",)
"""1 when the agent's code does not compile (a syntax error), else 0."""
IO = ("io_total", "io_passed")
"""Stdin/argv -> stdout cases: run and matched."""
ASSERTIONS = ("assert_total", "assert_passed")
"""Assert-style checks of a function's value: run and passed."""
CURE = ("cure_code_reward", "cure_test_reward", "cure_tests_total")
"""CURE's two rewards (code against the ground truth; the policy's tests against the reference
and known-wrong variants) and how many tests the policy wrote."""

GRADED = TESTS + COMPILE
"""What partial credit, CodeRL grades and execution-only need."""

ALL = TESTS + COMPILE + IO + ASSERTIONS + CURE
