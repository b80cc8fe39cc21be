"""How a policy acts in a scaffold's protocol: the actions palaestra's own policies send.

Each turn-loop scaffold (and the external one) says through a :class:`ProtocolActions` how an
action that runs a command looks in its protocol and how one that submits does; the ``oracle``
and ``nop`` policies (:mod:`palaestra.scaffolds.oracle`) speak every protocol through them.
Every method gets the observation (the :class:`LLMRequest`) the action answers.
"""

from __future__ import annotations

import abc

from palaestra.llm.types import LLMRequest, LLMResponse

#: The ``model`` of every response these actions make.
SCRIPTED_MODEL = "palaestra/scripted"


def text_response(content: str) -> LLMResponse:
    return LLMResponse(content=content, model=SCRIPTED_MODEL)


class ProtocolActions(abc.ABC):
    """A protocol's actions; subclasses give :meth:`run` and :meth:`submit`."""

    @abc.abstractmethod
    def run(self, request: LLMRequest, command: str, why: str = "") -> LLMResponse:
        """An action that runs the shell command ``command`` (``why``: a sentence to say
        before it, where the protocol has room for one)."""

    @abc.abstractmethod
    def submit(self, request: LLMRequest) -> LLMResponse:
        """An action that submits the work."""

    def after_run(self, request: LLMRequest) -> LLMResponse:
        """The action after :meth:`run`: submit once the command has finished (at once where
        running a command waits for it)."""
        return self.submit(request)
