"""Proxy benchmark: the overhead one LLM call pays for going through the proxy.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_proxy.py``.

Each episode is served by an instant policy (a constant ~300-character response with usage;
its own time is measured and subtracted, it is microseconds). Each episode's harness calls
``/e/<token>/v1/chat/completions`` in a loop with a 2-message, ~2 kB request, non-streaming and
streaming (SSE with ``include_usage``), using one of two clients:

* ``httpx``: a bare HTTP client that reads the JSON or the SSE lines: the proxy's own overhead
  (HTTP, routing, conversion to and from our types, encoding) plus a minimal client;
* ``openai``: the official ``openai`` SDK (``AsyncOpenAI``), as most harnesses call: adds the
  SDK's own request building and pydantic parsing of every chunk.

The overhead per call is the call's wall time at the client minus the policy's time. Clients
and server share one event loop and process here (a real harness is another process), so at
64 concurrent episodes the figures include the clients' CPU time queueing behind each other on
this machine's cores (p50 at 64 is then roughly 64 / throughput). ``cpu`` is the process CPU
time per call, server and client together: the cost that does not depend on machine load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time

import httpx
from headline import headline
from openai import AsyncOpenAI

from palaestra.llm import LLMRequest, LLMResponse, Usage
from palaestra.scaffolds.proxy import ProxyServer

RESPONSE = LLMResponse(
    content="I will list the files first.\n\n```bash\nls -la /app && cat /app/README.md | head -50\n```"
    * 3,
    usage=Usage(prompt_tokens=1200, completion_tokens=90),
)
MESSAGES = [
    {"role": "system", "content": "You are a skilled software engineer. " * 40},
    {"role": "user", "content": "Fix the failing test in /app. " * 20},
]


class InstantPolicy:
    def __init__(self) -> None:
        self.seconds = 0.0

    async def complete(self, request: LLMRequest) -> LLMResponse:
        started = time.perf_counter()
        response = RESPONSE
        self.seconds += time.perf_counter() - started
        return response


async def call_httpx(http: httpx.AsyncClient, url: str, stream: bool) -> str:
    body = {"model": "m", "messages": MESSAGES}
    if not stream:
        r = await http.post(url, json=body)
        return r.json()["choices"][0]["message"]["content"]
    body |= {"stream": True, "stream_options": {"include_usage": True}}
    text = []
    async with http.stream("POST", url, json=body) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                choices = json.loads(line[6:])["choices"]
                if choices:
                    text.append(choices[0]["delta"].get("content") or "")
    return "".join(text)


async def call_openai(client: AsyncOpenAI, stream: bool) -> str:
    if not stream:
        out = await client.chat.completions.create(model="m", messages=MESSAGES)
        return out.choices[0].message.content or ""
    chunks = await client.chat.completions.create(
        model="m", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    return "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])


class Harness:
    """One episode's outside harness. Its clients are built before timing starts (building
    one loads TLS certificates: tens of ms of CPU that would land on other episodes' calls)."""

    def __init__(self, proxy: ProxyServer, kind: str) -> None:
        self.proxy, self.kind = proxy, kind
        self.policy = InstantPolicy()
        self.ep = proxy.register(self.policy)
        self.url = proxy.url_for(self.ep)
        self.client = AsyncOpenAI(base_url=self.url, api_key="bench", max_retries=0)
        self.http = httpx.AsyncClient(timeout=600)

    async def run(self, calls: int, stream: bool) -> list[float]:
        times = []
        for _ in range(calls):
            before = self.policy.seconds
            started = time.perf_counter()
            if self.kind == "openai":
                text = await call_openai(self.client, stream)
            else:
                text = await call_httpx(self.http, f"{self.url}/chat/completions", stream)
            elapsed = time.perf_counter() - started
            assert text == RESPONSE.content
            times.append(elapsed - (self.policy.seconds - before))
        return times

    async def close(self) -> None:
        await self.client.close()
        await self.http.aclose()
        self.proxy.unregister(self.ep.token)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(concurrency: int, calls: int, stream: bool, kind: str) -> float:
    """Print the figures of ``calls`` calls by each of ``concurrency`` harnesses; return the
    overhead p50 in milliseconds."""
    async with ProxyServer() as proxy:
        harnesses = [Harness(proxy, kind) for _ in range(concurrency)]
        await asyncio.gather(*(h.run(2, stream) for h in harnesses))  # connect, warm up
        cpu, started = time.process_time(), time.perf_counter()
        results = await asyncio.gather(*(h.run(calls, stream) for h in harnesses))
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        for h in harnesses:
            await h.close()
    times = [t for r in results for t in r]
    mode = "stream" if stream else "json"
    print(
        f"{kind:<6} {concurrency:>3} episodes  {mode:<6} {len(times):>5} calls  "
        f"overhead p50 {1000 * statistics.median(times):7.2f} ms  "
        f"p99 {1000 * pct(times, 0.99):7.2f} ms  "
        f"cpu {1000 * cpu / len(times):5.2f} ms/call  "
        f"throughput {len(times) / wall:5.0f} calls/s"
    )
    return round(1000 * statistics.median(times), 2)


async def main(calls_single: int, calls_each: int, clients: list[str]) -> None:
    print(f"proxy overhead per call (python {sys.version.split()[0]}, {os.cpu_count()} cpus)")
    figures = {}
    for kind in clients:
        for stream in (False, True):
            mode = "stream" if stream else "json"
            figures[f"{kind}_{mode}_p50_ms"] = await measure(1, calls_single, stream, kind)
            await measure(64, calls_each, stream, kind)
    headline("proxy", **figures)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="calls for the single episode")
    parser.add_argument("--calls-each", type=int, default=20, help="calls per episode at 64")
    parser.add_argument(
        "--clients", default="httpx,openai", help="comma-separated: httpx, openai (default both)"
    )
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.calls_each, args.clients.split(",")))
