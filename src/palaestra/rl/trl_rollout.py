"""TRL's ``GRPOTrainer`` driving palaestra episodes, through its ``rollout_func`` hook.

TRL (1.x) lets a ``rollout_func(prompts, trainer) -> dict`` replace its generation: it returns
``prompt_ids``, ``completion_ids`` and ``logprobs`` per completion, optionally ``env_mask`` (1 on
the model's tokens, 0 on tokens the environment inserted), and any other key is passed to the
reward functions as a keyword argument. :class:`PalaestraRollout` is such a function:

* each prompt of the training dataset is a palaestra **task id** (a plain string); every
  occurrence of it in the batch (TRL repeats a prompt ``num_generations`` times) is one episode
  of that task, all reset with the same seed, so the group compares attempts at one task;
* the episodes run on an :class:`~palaestra.llm.local_hf.HFLocalPolicy` that serves the TRL
  model's current weights (copied in with ``load_weights`` whenever TRL's ``global_step`` moved,
  as TRL syncs vLLM) in a background event loop, ``concurrency`` at a time;
* each episode becomes one token-exact sequence (:func:`~palaestra.rl.trajectory.to_trajectory`):
  the first prompt is the prompt, everything after it the "completion", whose ``env_mask``
  is the trajectory's loss mask (the policy's tokens 1, tool outputs and later prompts 0) and
  whose ``logprobs`` are the ones the policy sampled with;
* the verifier's reward is returned as ``palaestra_reward``: pass :func:`episode_reward` as
  ``reward_funcs``.

The episodes run on a :class:`~palaestra.run.executor.LocalExecutor` (one environment per
episode in flight, reused) and follow :class:`~palaestra.run.retry.RetryPolicy`, as in
``evaluate`` and ``RolloutStream``: an infrastructure error runs again after a backoff, up to
``retries`` times. An episode that ends in an error all the same (a deterministic one at once),
or without a turn, fails the batch with the error named (TRL has no way to drop one
completion).

TRL recomputes the completions' log-probabilities at ``GRPOConfig.temperature`` over the whole
vocabulary. Every turn must therefore have been sampled at that temperature with no top_p or
top_k (the policy reports what it used, :mod:`palaestra.rl.behaviour`): a batch that was not
fails in one line naming the turn and the fix. On the first call the TRL model's
log-probabilities of the first episodes' tokens are compared with the ones the policy sampled
with (their mean ``|log r|`` must stay within ``ratio_tolerance``): another checkpoint, dtype or
chat template fails there, before any step. The comparison runs twice, in ``eval`` mode and in
the mode TRL's own forward passes run in (training): a model whose dropout is on there (TRL's
``disable_dropout`` defaults to False) fails the second, with the fix named.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

from palaestra.env.registry import make
from palaestra.env.types import EpisodeStatus
from palaestra.llm.local_hf import HFLocalPolicy
from palaestra.rl.behaviour import RatioCheckFailed, check_ratio, check_sampling
from palaestra.rl.loss import sample_logprobs
from palaestra.rl.trajectory import Trajectory, to_trajectory
from palaestra.run.executor import LocalExecutor
from palaestra.run.retry import RetryPolicy
from palaestra.run.rollout import Episode


def episode_reward(prompts: Any, completions: Any, palaestra_reward: list[float], **_: Any):
    """The reward function to pass to TRL: the verifier's reward of each episode."""
    return list(palaestra_reward)


class PalaestraRollout:
    """A TRL ``rollout_func`` that runs palaestra episodes; see the module docstring.

    ``env``: an env id (each episode gets ``palaestra.make(env, **env_kwargs)``) or a factory
    of environments. ``policy``: the local policy on the same checkpoint as the TRL model.
    ``retries`` / ``retry_backoff_s``: as ``evaluate``'s (``max_retries`` is the old name of
    ``retries``, deprecated). Call :meth:`close` when training is done (it stops the
    background loop, closes the environments and the policy).
    """

    def __init__(
        self,
        env: str | Callable[[], Any],
        policy: HFLocalPolicy,
        *,
        concurrency: int = 8,
        retries: int | RetryPolicy = 2,
        retry_backoff_s: float | None = None,
        max_retries: int | None = None,
        seed: int = 0,
        ratio_tolerance: float = 0.05,
        **env_kwargs: Any,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency={concurrency} must be >= 1")
        self.retry = RetryPolicy.of(
            retries, retry_backoff_s, max_retries=max_retries, owner="PalaestraRollout"
        )
        self.env, self.env_kwargs = env, env_kwargs
        self.policy, self.concurrency = policy, concurrency
        make_env = (lambda: make(env, **env_kwargs)) if isinstance(env, str) else env
        self._executor = LocalExecutor(make_env, policy)
        self.seed = seed
        self.ratio_tolerance = ratio_tolerance
        self.calls = 0
        self._synced_step: int | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="palaestra-trl-rollout", daemon=True
        )
        self._thread.start()

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list[Any]]:
        self.calls += 1
        step = int(trainer.state.global_step)
        if self._synced_step is not None and step != self._synced_step:
            model = trainer.accelerator.unwrap_model(trainer.model)
            state = {k: v.detach() for k, v in model.state_dict().items()}
            self._run(self.policy.load_weights(state, version=step))
        self._synced_step = step
        episodes = self._run(self._episodes([_task_id(p) for p in prompts], step))
        out: dict[str, list[Any]] = {
            "prompt_ids": [],
            "completion_ids": [],
            "logprobs": [],
            "env_mask": [],
            "palaestra_reward": [],
        }
        samples = [to_trajectory(episode) for episode in episodes]
        temperature = float(trainer.args.temperature)
        check_sampling(samples, temperature, setting="trl.GRPOConfig(temperature={:g})")
        if self.calls == 1:
            self._check_ratio(trainer, samples[:4], temperature)
        for episode, sample in zip(episodes, samples, strict=True):
            cut = sample.prompt_length
            out["prompt_ids"].append(sample.token_ids[:cut])
            out["completion_ids"].append(sample.token_ids[cut:])
            out["logprobs"].append((sample.logprobs or [0.0] * len(sample))[cut:])
            out["env_mask"].append(sample.loss_mask[cut:])
            out["palaestra_reward"].append(episode.reward)
        return out

    def _check_ratio(self, trainer: Any, samples: list[Trajectory], temperature: float) -> None:
        """The TRL model's logprobs of the sampled tokens must be the policy's (ratio 1): in
        ``eval`` mode (the same weights and template), then in the mode TRL's own forward
        passes run in (training: dropout on unless disabled)."""
        model = trainer.accelerator.unwrap_model(trainer.model)
        eval_gap = _mean_gap(model, samples, temperature, eval_mode=True)
        if eval_gap is None:
            return
        check_ratio(eval_gap, _policy_tokens(samples), self.ratio_tolerance)
        gap = _mean_gap(model, samples, temperature, eval_mode=False)
        if gap is not None and gap > self.ratio_tolerance:
            raise RatioCheckFailed(
                f"the TRL model's log-probabilities differ from the policy's by {gap:.3g} nats "
                f"per token in train mode ({eval_gap:.3g} in eval mode): its dropout is on "
                "where TRL computes them; set trl.GRPOConfig(disable_dropout=True), and load "
                "the model with its config's dropout probabilities (attention_dropout...) at 0"
            )

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _episodes(self, task_ids: list[str], step: int) -> list[Episode]:
        slots = asyncio.Semaphore(self.concurrency)

        async def play(task_id: str) -> Episode:
            async with slots:
                options = {"task_id": task_id} if task_id else None
                return await self._executor.run(self.seed + step, options)

        async def one(task_id: str) -> Episode:
            episode = await self.retry.run(lambda: play(task_id))
            if episode.status == EpisodeStatus.ERROR:
                why = (
                    f"an infrastructure error, {self.retry.retries} retries spent"
                    if episode.end.infra_error
                    else "a deterministic error, not retried"
                )
                raise RuntimeError(
                    f"task {task_id!r}: the episode ended in {why}: {episode.end.error}"
                )
            if not episode.turns:
                raise RuntimeError(f"task {task_id!r}: the episode ended before its first turn")
            return episode

        return list(await asyncio.gather(*(one(t) for t in task_ids)))

    def close(self) -> None:
        """Stop the policy and the background loop."""
        if self._loop.is_closed():
            return
        self._run(self._executor.aclose())
        self._run(self.policy.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


def _policy_tokens(samples: list[Trajectory]) -> int:
    return sum(sum(s.loss_mask) for s in samples if s.logprobs is not None)


def _mean_gap(
    model: Any, samples: list[Trajectory], temperature: float, *, eval_mode: bool
) -> float | None:
    """Mean ``|log r|`` of ``model`` against the sampled logprobs over the policy's tokens
    (None when no sample carries logprobs)."""
    diffs = [
        abs(now - then)
        for sample in samples
        if sample.logprobs is not None
        for now, then, m in zip(
            sample_logprobs(model, sample, temperature, eval_mode=eval_mode),
            sample.logprobs,
            sample.loss_mask,
            strict=True,
        )
        if m
    ]
    return sum(diffs) / len(diffs) if diffs else None


def _task_id(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    raise TypeError(
        "PalaestraRollout expects each dataset prompt to be a task id string (the episode builds "
        f"its own conversation), got {type(prompt).__name__}; use a 'prompt' column of task ids"
    )
