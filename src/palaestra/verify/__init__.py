"""Verification: a :class:`Verifier` turns the work in a sandbox into a :class:`VerifierResult`.

:class:`HarborVerifier` runs a task's ``tests/test.sh`` as Harbor does, inside the phase
boundary of :mod:`.boundary`; a :class:`RewardStrategy` (``get_strategy("partial")``...) turns
its outcome into the episode's reward, applied by :class:`StrategyVerifier` around any verifier.
"""

from palaestra.verify.harbor import HarborVerifier, VerifierResult, VerifierStatus
from palaestra.verify.protocol import Verifier
from palaestra.verify.strategies import (
    RewardStrategy,
    RewardStrategyError,
    StrategyVerifier,
    get_strategy,
)

__all__ = [
    "HarborVerifier",
    "RewardStrategy",
    "RewardStrategyError",
    "StrategyVerifier",
    "Verifier",
    "VerifierResult",
    "VerifierStatus",
    "get_strategy",
]
