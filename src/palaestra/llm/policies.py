"""A scripted policy for tests: answers from a fixed list (or a function of the request).

The policies that need no model but speak a scaffold's protocol, ``oracle`` and ``nop``, live
with the scaffolds, in ``scaffolds/oracle.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from palaestra.llm.types import LLMRequest, LLMResponse, SamplingParams

Script = Sequence[str | LLMResponse] | Callable[[LLMRequest], str | LLMResponse]


class ScriptedPolicy:
    """Answers from a fixed list of responses (or a function of the request).

    Strings become text responses. Running past the end of the list raises, so a test that
    expects fewer turns fails loudly instead of looping. A response that says nothing of its
    sampling reports the parameters the request asked for (``LLMResponse.sampling``), as a
    policy honouring them would: a scripted answer is drawn from no distribution, but the path
    from a scaffold's ``SamplingParams`` to a trajectory can be tested without a model.
    """

    name = "scripted"

    def __init__(self, script: Script) -> None:
        self._fn = script if callable(script) else None
        self._items = iter(()) if callable(script) else iter(script)
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        if self._fn is not None:
            item = self._fn(request)
        else:
            try:
                item = next(self._items)
            except StopIteration:
                raise RuntimeError(
                    f"scripted policy ran out of responses at request {len(self.requests) - 1}"
                ) from None
        response = item if isinstance(item, LLMResponse) else LLMResponse(content=item)
        if response.sampling is None:
            response = response.model_copy(update={"sampling": _asked(request.sampling)})
        return response


def _asked(sampling: SamplingParams) -> SamplingParams:
    """The sampling parameters a request asked for, as a policy honouring them reports them."""
    return SamplingParams(
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        top_k=sampling.top_k,
        max_tokens=sampling.max_tokens,
    )
