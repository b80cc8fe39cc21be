"""Recording chosen activations while a batch generates, for interpretability.

:class:`ActivationRecorder` puts forward hooks on named modules of the model (names as
``model.named_modules()`` gives them, e.g. ``model.layers.3`` or ``model.layers.3.mlp``) for the
time of one batch. Each hook keeps the module's output (the first element when it returns a
tuple: a decoder layer's hidden states) as float32 on the CPU. Per row of the batch it gives, for
each module, a list of positions x hidden values:

* ``"last"``: one position, the last prompt token: the state the first completion token was
  sampled from;
* ``"all"``: every token the model read for this row: the prompt's tokens, then the completion's
  tokens but the last (that one was sampled, never fed back in).

Runs in the policy's worker thread, inside :func:`~palaestra.llm.local_hf.generation.generate`.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any, Literal

ActivationTokens = Literal["last", "all"]


def check_modules(model: Any, names: Sequence[str]) -> None:
    """Fail with the closest names when a module to record is not in ``model``."""
    known = dict(model.named_modules())
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ValueError(
                f"record_activations: the model has no module {name!r}{hint} "
                "(names as model.named_modules() lists them)"
            )


class ActivationRecorder:
    """Forward hooks on ``names`` while the ``with`` block runs; see the module docstring."""

    def __init__(self, model: Any, names: Sequence[str], tokens: ActivationTokens) -> None:
        if tokens not in ("last", "all"):
            raise ValueError(f"activation_tokens={tokens!r}: choose 'last' or 'all'")
        self.model, self.names, self.tokens = model, list(names), tokens
        self.calls: dict[str, list[Any]] = {n: [] for n in self.names}
        self._handles: list[Any] = []

    def __enter__(self) -> ActivationRecorder:
        modules = dict(self.model.named_modules())
        for name in self.names:
            self._handles.append(modules[name].register_forward_hook(self._hook(name)))
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _hook(self, name: str) -> Any:
        calls = self.calls[name]

        def keep(module: Any, inputs: Any, output: Any) -> None:
            hidden = output[0] if isinstance(output, tuple) else output
            if self.tokens == "last":
                if not calls:  # the prompt's pass only
                    calls.append(hidden[:, -1:].detach().float().cpu())
            else:
                calls.append(hidden.detach().float().cpu())

        return keep

    def rows(
        self, prompt_lengths: Sequence[int], completion_lengths: Sequence[int]
    ) -> list[dict[str, list[list[float]]]]:
        """Per row (left-padded batch), each module's positions x hidden values."""
        out: list[dict[str, list[list[float]]]] = [{} for _ in prompt_lengths]
        for name, calls in self.calls.items():
            if not calls:
                continue
            prefill, steps = calls[0], calls[1:]
            for i, (n_prompt, n_completion) in enumerate(
                zip(prompt_lengths, completion_lengths, strict=True)
            ):
                if self.tokens == "last":
                    out[i][name] = prefill[i].tolist()
                    continue
                import torch

                parts = [prefill[i, prefill.shape[1] - n_prompt :]]
                parts += [step[i] for step in steps[: max(n_completion - 1, 0)]]
                out[i][name] = torch.cat(parts).tolist()
        return out
