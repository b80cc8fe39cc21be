"""`palaestra serve`'s one-line errors, and the session registry's limits and idle reaping."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

import pytest

from palaestra.env.types import Environment
from palaestra.serve import PROTOCOLS, Protocol
from palaestra.serve.server import MissingExtra, check_protocol
from palaestra.serve.sessions import AtCapacity, Limits, SessionClosed, Sessions
from tests.procs import eventually


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "palaestra.cli", "serve", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_bad_input_is_one_line_and_exit_2():
    unknown = _serve("no-such-env", "--port", "0")
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1
    assert "no environment or task 'no-such-env'" in unknown.stderr
    protocol = _serve("starter", "--protocol", "carrier-pigeon", "--port", "0")
    assert protocol.returncode == 2 and "choose one of: mcp, openenv, ors" in protocol.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        in_use = _serve("starter", "--port", port)
    assert in_use.returncode == 2 and in_use.stderr.count("\n") == 1
    assert f"--port {port}" in in_use.stderr and "pick another port" in in_use.stderr
    assert "Traceback" not in unknown.stderr + protocol.stderr + in_use.stderr


def test_a_protocol_whose_package_is_missing_names_the_extra(monkeypatch):
    monkeypatch.setitem(PROTOCOLS, "mcp", Protocol("palaestra.nowhere", "no_such_package_x"))
    with pytest.raises(MissingExtra, match=r"pip install 'palaestra\[serve\]'"):
        check_protocol("mcp")


class _Env(Environment):
    """Below the layer under test: an environment that counts its closes."""

    closed = 0

    async def reset(self, *, seed=None, options=None):
        raise NotImplementedError

    async def step(self, action):
        raise NotImplementedError

    async def close(self) -> None:
        type(self).closed += 1


async def test_sessions_cap_reserve_and_close_idle_ones_but_not_busy_ones():
    _Env.closed = 0
    sessions = Sessions(_Env, Limits(max_sessions=2, idle_timeout_s=0.2))
    assert sessions.reserve("a") and sessions.reserve("b") and not sessions.reserve("a")
    with pytest.raises(AtCapacity, match="--max-sessions 2"):
        sessions.reserve("c")
    ended: list[str] = []

    async def end(key):
        ended.append(key)

    reaper = asyncio.create_task(sessions.reap(end))
    async with sessions.busy("a"):  # in flight past the timeout: not idle
        await sessions.env("b")
        assert await eventually(lambda: ended == ["b"])
        assert "b" not in sessions and "a" in sessions
    assert await eventually(lambda: ended == ["b", "a"])
    reaper.cancel()
    assert "a" not in sessions and ended == ["b", "a"] and _Env.closed == 2
    with pytest.raises(SessionClosed, match="idle for more than 0.2 s"):
        await sessions.env("b")
    with pytest.raises(SessionClosed):
        sessions.reserve("b")  # a released session is never reopened
    sessions.reserve("c")
    await sessions.env("c")
    await sessions.close_all()
    assert len(sessions) == 0 and _Env.closed == 3
