"""Local-policy throughput: generated tokens per second of HFLocalPolicy at batch 1 and 8.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_local_policy.py``.

The model is the tiny random Llama of ``write_tiny_model`` (2 layers, hidden 32, byte-level BPE
vocabulary of 320), so the figure is the serving path's own cost — batching, the per-token
sampling loop, logprob bookkeeping, the worker thread — not a real model's compute. Each round
sends ``batch`` concurrent requests (distinct episodes, same prompt length class) of
``--max-tokens`` tokens at temperature 1; tokens/s counts the completion tokens actually
generated (a row may end early on its end-of-sequence token) over the round's wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from headline import headline

from palaestra.llm import LLMRequest, SamplingParams
from palaestra.llm.local_hf import HFLocalPolicy, write_tiny_model


def request(i: int, max_tokens: int) -> LLMRequest:
    return LLMRequest(
        messages=[
            {"role": "system", "content": "You are a skilled software engineer."},
            {"role": "user", "content": f"Task {i}: list the files and run the tests."},
        ],
        sampling=SamplingParams(temperature=1.0, max_tokens=max_tokens, seed=i),
        metadata={"episode_id": f"bench-{i}"},
    )


async def measure(policy: HFLocalPolicy, batch: int, rounds: int, max_tokens: int) -> list[float]:
    """Tokens per second of each round."""
    rates = []
    for r in range(rounds):
        started = time.perf_counter()
        responses = await asyncio.gather(
            *(policy.complete(request(r * batch + i, max_tokens)) for i in range(batch))
        )
        wall = time.perf_counter() - started
        rates.append(sum(len(x.completion_token_ids or []) for x in responses) / wall)
    return rates


async def main(args: argparse.Namespace) -> None:
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = write_tiny_model(Path(tmp) / "tiny")
        async with HFLocalPolicy(
            model_dir, device=args.device, max_batch_size=max(args.batches)
        ) as policy:
            await policy.load()
            await measure(policy, 1, 2, 8)  # warm-up
            import torch

            print(
                f"tiny model, device {policy.device}, {torch.get_num_threads()} torch threads, "
                f"{args.max_tokens} tokens per request"
            )
            figures = {}
            for batch in args.batches:
                rates = await measure(policy, batch, args.rounds, args.max_tokens)
                figures[f"tokens_per_s_b{batch}"] = round(statistics.median(rates))
                print(
                    f"batch {batch:>2}: {statistics.median(rates):8.0f} tokens/s "
                    f"(median of {args.rounds} rounds; min {min(rates):.0f}, max {max(rates):.0f})"
                )
            headline("local_policy", device=str(policy.device), **figures)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    asyncio.run(main(parser.parse_args()))
