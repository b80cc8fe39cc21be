from palaestra.env.types import StepType, restart, termination, transition, truncation


def test_first_has_no_reward_or_discount():
    ts = restart("obs", {})
    assert ts.first() and ts.reward is None and ts.discount is None
    assert not ts.terminated and not ts.truncated


def test_mid_reward_zero_discount_one():
    ts = transition("obs", {})
    assert ts.mid() and ts.reward == 0.0 and ts.discount == 1.0


def test_termination_vs_truncation():
    term, trunc = termination(1.0, "final", {}), truncation(0.5, "next", {})
    assert term.step_type is StepType.LAST and term.discount == 0.0
    assert (term.observation, trunc.observation) == ("final", "next")
    assert term.end is None  # the end is info["end"]: CodeEnv sets it (tests/env/test_episode_end)
    assert term.terminated and not term.truncated
    assert trunc.last() and trunc.discount == 1.0 and trunc.reward == 0.5
    assert trunc.truncated and not trunc.terminated
