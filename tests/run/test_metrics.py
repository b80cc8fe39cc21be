"""pass@k and the summary's groups, against hand-computed values."""

from __future__ import annotations

import math

import pytest

from palaestra.run.metrics import NO_GROUP, pass_at_k, pass_at_ks, percentile, summarize


def test_pass_at_k_matches_hand_computed_values():
    # n=5 attempts, c=2 correct: 1 - C(3,k)/C(5,k)
    assert pass_at_k(5, 2, 1) == pytest.approx(2 / 5)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - 1 / 10)
    assert pass_at_k(5, 2, 4) == 1.0
    assert pass_at_k(5, 2, 5) == 1.0
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 5, 1) == 1.0


def test_pass_at_k_is_stable_for_large_n():
    exact = 1 - math.comb(190, 10) / math.comb(200, 10)
    assert pass_at_k(200, 10, 10) == pytest.approx(exact, rel=1e-12)


def test_pass_at_k_rejects_bad_arguments():
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="c <= n"):
        pass_at_k(3, 4, 1)


def _rec(task, status, **kw):
    base = {
        "task_id": task,
        "status": status,
        "reward": 1.0 if status == "passed" else 0.0,
        "steps": 2,
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "cached_tokens": 0,
        "cost_usd": None,
        "category": None,
        "difficulty": None,
        "family": None,
        "error_class": None,
        "wall_s": 1.0,
        "end_reason": "submitted",
    }
    return {**base, **kw}


def test_pass_at_ks_averages_over_tasks():
    records = [_rec("a", s) for s in ("passed", "failed", "passed", "failed", "failed")]
    records += [_rec("b", "failed")] * 5
    got = pass_at_ks(records)
    assert list(got) == [1, 2, 3, 4, 5]
    assert got[1] == pytest.approx((0.4 + 0.0) / 2)
    assert got[2] == pytest.approx((0.7 + 0.0) / 2)


def test_summary_groups_costs_and_errors():
    records = [
        _rec("a", "passed", difficulty="hard", family="grid", category="x", cost_usd=0.5),
        _rec(
            "b",
            "failed",
            difficulty="easy",
            family="grid",
            category="x",
            cost_usd=0.25,
            end_reason="step_limit",
        ),
        _rec(
            "c",
            "error",
            difficulty="medium",
            error_class="SandboxError",
            category="y",
            end_reason="error",
        ),
        _rec("d", "passed", difficulty="easy", category="y"),
    ]
    s = summarize(records)
    # a truncated episode that did not pass is failed; the limit is its end reason
    assert s["statuses"] == {"error": 1, "failed": 1, "passed": 2}
    assert s["end_reasons"] == {"error": 1, "step_limit": 1, "submitted": 2}
    assert list(s["by_difficulty"]) == ["easy", "medium", "hard"]
    assert s["by_family"]["grid"]["pass_rate"] == 0.5 and s["by_family"][NO_GROUP]["episodes"] == 2
    assert s["errors_by_class"] == {"SandboxError": {"count": 1, "rate": 0.25}}
    cost = s["cost"]
    assert cost["known_trials"] == 2 and cost["unknown_trials"] == 2
    assert cost["total_usd"] == 0.75 and cost["per_trial_usd"] == 0.375
    assert cost["per_solved_usd"] == 0.75 / 2 and cost["solved_with_unknown_cost"] == 1
    assert s["tokens"]["per_trial"]["prompt_tokens"] == 10


def test_unknown_costs_are_not_zero():
    s = summarize([_rec("a", "passed")])
    assert s["cost"]["total_usd"] is None and s["cost"]["per_trial_usd"] is None


def test_percentile_interpolates():
    assert percentile([1, 2, 3, 4], 0.5) == 2.5
    assert percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.9) == pytest.approx(9.1)
