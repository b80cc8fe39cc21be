"""Runners: single rollouts, resumable parallel evaluation, its results store, metrics, reports."""

from palaestra.run.evaluate import evaluate
from palaestra.run.metrics import pass_at_k, summarize
from palaestra.run.retry import RetryPolicy
from palaestra.run.rollout import Episode, Turn, rollout
from palaestra.run.rows import episode_row
from palaestra.run.store import ResultStore, RunMismatchError

__all__ = [
    "Episode",
    "ResultStore",
    "RetryPolicy",
    "RunMismatchError",
    "Turn",
    "episode_row",
    "evaluate",
    "pass_at_k",
    "rollout",
    "summarize",
]
