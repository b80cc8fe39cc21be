"""Policy versions: which weights produced a response.

An RL trainer updates the policy while episodes are still running (asynchronous RL, as in
AReaL). Every policy that takes part carries an integer ``policy_version`` the trainer bumps
after each update, and stamps it on every :class:`~palaestra.llm.types.LLMResponse` it
produces (``response.policy_version``), so a finished episode says which version wrote each
turn and how stale it is.

:class:`~palaestra.llm.local_hf.HFLocalPolicy` bumps its version when it loads new weights;
:class:`~palaestra.llm.openai_client.OpenAIChatPolicy` when the trainer syncs the server's
weights (``sync_weights``) or sets it; :class:`VersionedPolicy` gives any other client one.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from palaestra.llm.client import LLMClient
from palaestra.llm.types import LLMRequest, LLMResponse


@runtime_checkable
class Versioned(Protocol):
    """A policy whose current weights have a version number."""

    policy_version: int


def current_version(policy: object) -> int | None:
    """``policy.policy_version`` when the policy has one (an int), else None."""
    version = getattr(policy, "policy_version", None)
    return version if isinstance(version, int) else None


def stamp(response: LLMResponse, version: int) -> LLMResponse:
    """``response`` with ``policy_version`` set, unless the policy already set it."""
    if response.policy_version is not None:
        return response
    return response.model_copy(update={"policy_version": version})


class VersionedPolicy:
    """Any :class:`LLMClient` with a version the trainer bumps (:meth:`bump`).

    A response gets the version current when its request was sent (a policy that stamps its
    own responses keeps its stamp): a request in flight across an update belongs to the
    weights it started on.
    """

    def __init__(self, policy: LLMClient, *, version: int = 0) -> None:
        self.policy = policy
        self.policy_version = version
        self.name = getattr(policy, "name", type(policy).__name__)

    def bump(self, version: int | None = None) -> int:
        """Set the version (default: the current one plus 1) and return it."""
        self.policy_version = self.policy_version + 1 if version is None else version
        return self.policy_version

    async def complete(self, request: LLMRequest) -> LLMResponse:
        version = self.policy_version
        return stamp(await self.policy.complete(request), version)
