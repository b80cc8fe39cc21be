"""A ``palaestra serve`` subprocess for the tests, and episodes driven by each protocol's own
client (``openenv-core``'s ``GenericEnvClient``, ``ors-sdk``'s ``AsyncORS``)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from palaestra.llm.client import LLMClient
from palaestra.llm.types import LLMRequest, LLMResponse
from tests.procs import _processes, sandbox_processes


@dataclass
class Server:
    proc: subprocess.Popen[str]
    url: str
    name: str  # the environment's name for ORS clients
    log: Path

    state_dir: Path

    def sandboxes(self) -> list[str]:
        """The server's local sandboxes' processes (bwrap and everything below), alive or
        orphaned: they all name its state directory."""
        return sandbox_processes(str(self.state_dir) + "/")

    def alive(self) -> bool:
        return self.proc.poll() is None and self.proc.pid in _processes()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(60)


@contextlib.contextmanager
def served(env_id: str, protocol: str, tmp_path: Path, *options: str) -> Iterator[Server]:
    """``palaestra serve ENV_ID --protocol PROTOCOL --port 0 OPTIONS``, running until the block
    ends (then SIGTERM, if the test did not stop it)."""
    log = tmp_path / f"serve-{protocol}.log"
    # its own state directory, reachable by the sandboxes' uid whatever pytest's temp dirs'
    # modes are (another pytest run on the machine may close them at any time)
    state_dir = Path(tempfile.mkdtemp(prefix="palaestra-serve-test-"))
    state_dir.chmod(0o711)
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "palaestra.cli", "serve", env_id]
            + ["--protocol", protocol, "--port", "0", *options],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env={**os.environ, "COLUMNS": "300", "PALAESTRA_STATE_DIR": str(state_dir)},
        )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the announcement, once the socket is bound
        found = re.search(r" on (http://\S+)", line)
        if found is None:
            proc.wait(30)
            raise AssertionError(f"no address announced: {line!r} {log.read_text()}")
        client = proc.stdout.readline()
        name = re.search(r"environment\('([^']+)'\)", client)
        yield Server(proc, found.group(1), name.group(1) if name else env_id, log, state_dir)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        assert proc.stdout is not None
        proc.stdout.close()
        shutil.rmtree(state_dir, ignore_errors=True)


def action_json(response: LLMResponse) -> dict[str, Any]:
    return response.model_dump(mode="json", exclude_none=True, exclude={"activations"})


async def openenv_episode(url: str, policy: LLMClient, task_id: str) -> tuple[float, str, int]:
    """One episode through OpenEnv's own client: (reward, status, steps)."""
    from openenv.core.generic_client import GenericEnvClient

    async with GenericEnvClient(base_url=url, message_timeout_s=300) as client:
        result = await client.reset(task_id=task_id)
        assert result.observation["step_type"] == "first" and result.reward is None
        steps = 0
        while not result.done:
            request = LLMRequest.model_validate(result.observation["request"])
            result = await client.step(action_json(await policy.complete(request)))
            steps += 1
        assert result.observation["step_type"] == "last"
        return result.reward, result.observation["end"]["status"], steps


async def ors_episode(
    url: str, name: str, policy: LLMClient, task_id: str, *, task_tools: bool = False
) -> tuple[float, str, int]:
    """One episode through ORS's own client: (reward, status, steps). ``task_tools``: a
    response with one tool call is sent as a call of that tool (the observation's functions are
    ORS task tools), any other through ``respond``."""
    from ors.client import AsyncORS

    client = AsyncORS(url)  # held: collecting it closes its HTTP session under the episode
    env = client.environment(name)
    task = next(t for t in await env.list_tasks("train") if t.task_spec["task_id"] == task_id)
    async with env.session(task=task) as session:
        prompt = await session.get_prompt()
        request = LLMRequest.model_validate(prompt[0].detail["observation"])
        offered = {t.name for t in await session.list_tools()}
        steps = 0
        while True:
            response = await policy.complete(request)
            if (
                task_tools
                and len(response.tool_calls) == 1
                and response.tool_calls[0].name in offered
            ):
                call = response.tool_calls[0]
                output = await session.call_tool(call.name, call.parsed_arguments())
            else:
                output = await session.call_tool("respond", action_json(response))
            steps += 1
            if output.finished:
                del client
                end = output.metadata["end"]
                if end["status"] != "passed":  # say why, should a test expect otherwise
                    print(task_id, {k: end[k] for k in ("reason", "error", "verified") if k in end})
                return output.reward, end["status"], steps
            assert output.reward == 0.0 and output.metadata["step_type"] == "mid"
            request = LLMRequest.model_validate(output.metadata["observation"])
