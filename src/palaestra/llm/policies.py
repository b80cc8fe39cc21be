"""A scripted policy for tests: answers from a fixed list (or a function of the request).

The policies that need no model but speak a scaffold's protocol, ``oracle`` and ``nop``, live
with the scaffolds, in ``scaffolds/oracle.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from palaestra.llm.types import LLMRequest, LLMResponse

Script = Sequence[str | LLMResponse] | Callable[[LLMRequest], str | LLMResponse]


class ScriptedPolicy:
    """Answers from a fixed list of responses (or a function of the request).

    Strings become text responses. Running past the end of the list raises, so a test that
    expects fewer turns fails loudly instead of looping.
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
        return item if isinstance(item, LLMResponse) else LLMResponse(content=item)
