"""The external scaffold's proxy outlives its last episode by ``PROXY_LINGER_S`` (5 s); here
it is a moment, and :func:`proxy_stopped` waits for that stop, so a test sees its proxy go."""

from __future__ import annotations

import pytest

from palaestra.scaffolds import external

#: The linger the scaffold tests run with (test_external's linger test sets its own).
TEST_LINGER_S = 0.05


@pytest.fixture(autouse=True)
def _short_proxy_linger(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(external, "PROXY_LINGER_S", TEST_LINGER_S)


async def proxy_stopped(scaffold: external.ExternalScaffold) -> bool:
    """Whether the scaffold's own proxy is stopped once its pending linger has run out."""
    linger = scaffold._linger
    if linger is not None:
        await linger
    return scaffold._own_proxy is None
