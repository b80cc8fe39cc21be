"""Screen wordings of ``shell-lookup``'s easy tier for a small model, one response at a time.

A ``shell-lookup`` easy episode passes only if the model's first response reads the task file
(``cat P``) and its second acts on what that printed. Measuring each wording with ``palaestra
eval`` costs a sandbox and two responses per episode; this screen asks the policy for one
response per prompt, all in one batch, and judges it without a sandbox:

* ``1:<name>`` variants: the first response of an episode, worded as named; it counts when its
  one fenced block has a line that is exactly ``cat P``;
* ``2:<name>`` variants: the second response, after a first response forced to ``cat P`` and an
  observation showing the file's task, worded as named; it counts when its one block is the
  reference command (``mkdir [-p] D``, ``echo W > P``, ``rm [-f] P``; quotes and spaces ignored).

An episode's pass rate is at most the first rate times the second. The prompts use
``bash-compact``'s system prompt and answer-form lines. Tasks: easy evaluation tasks from seed
100000. Run (prints each variant's count and its first responses)::

    OMP_NUM_THREADS=2 python benchmarks/lookup_wordings.py --tasks 8 --temperature 0
    OMP_NUM_THREADS=2 python benchmarks/lookup_wordings.py --tasks 8 --temperature 0.3 \\
        --samples 2 --variants 1:run-this
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from collections.abc import Callable
from typing import Any

from palaestra.llm import SamplingParams
from palaestra.llm.local_hf import HFLocalPolicy
from palaestra.llm.types import LLMRequest
from palaestra.scaffolds.bash import parse_actions
from palaestra.scaffolds.bash_compact import COMPACT_SYSTEM_TEMPLATE
from palaestra.tasks import generators

REPLY = "Reply with the command in a ```bash code block."
NEXT = "Reply with the next command in a ```bash code block."


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


SYSTEM = {"role": "system", "content": COMPACT_SYSTEM_TEMPLATE}
ONE_COMMAND = {"role": "system", "content": COMPACT_SYSTEM_TEMPLATE + f" {REPLY}"}
DEMO = [
    user(f"Print the file `/etc/hostname`.\n\n{REPLY}"),
    assistant("```bash\ncat /etc/hostname\n```"),
]

DEMO_TWO = [
    user(f"Print the file `/app/notes.txt`.\n\n{REPLY}"),
    assistant("```bash\ncat /app/notes.txt\n```"),
    user(f"Print the file `/app/list.txt`.\n\n{REPLY}"),
    assistant("```bash\ncat /app/list.txt\n```"),
]


def _read(t: dict[str, str]) -> list[dict[str, str]]:
    """The first turn, done: 'Print the file' and a forced ``cat``."""
    return [
        SYSTEM,
        user(f"Print the file `{t['path']}`.\n\n{REPLY}"),
        assistant(f"```bash\ncat {t['path']}\n```"),
    ]


VARIANTS: dict[str, Callable[[dict[str, str]], list[dict[str, str]]]] = {
    "1:current": lambda t: [SYSTEM, user(f"{t['instruction']}\n\n{REPLY}")],
    "1:print": lambda t: [SYSTEM, user(f"Print the file `{t['path']}`.\n\n{REPLY}")],
    "1:print-holds": lambda t: [
        SYSTEM,
        user(f"Print the file `{t['path']}`: it holds your task.\n\n{REPLY}"),
    ],
    "1:print-cmd": lambda t: [
        SYSTEM,
        user(f"Print the file `{t['path']}`:\n\n```bash\ncat {t['path']}\n```\n\n{REPLY}"),
    ],
    "1:system-one-command": lambda t: [
        ONE_COMMAND,
        user(f"Print the file `{t['path']}`.\n\n{REPLY}"),
    ],
    "1:demo": lambda t: [SYSTEM, *DEMO, user(f"Print the file `{t['path']}`.\n\n{REPLY}")],
    "1:demo-two": lambda t: [SYSTEM, *DEMO_TWO, user(f"Print the file `{t['path']}`.\n\n{REPLY}")],
    "1:run-this": lambda t: [
        SYSTEM,
        user(f"Run this command:\n\n```bash\ncat {t['path']}\n```\n\n{REPLY}"),
    ],
    "1:run-inline": lambda t: [SYSTEM, user(f"Run `cat {t['path']}`.\n\n{REPLY}")],
    "1:show-with-cat": lambda t: [
        SYSTEM,
        user(f"Show the contents of `{t['path']}` with `cat`.\n\n{REPLY}"),
    ],
    "2:output": lambda t: [*_read(t), user(f"Output:\n{t['note']}\n\n{NEXT}")],
    "2:plain": lambda t: [*_read(t), user(f"{t['note']}\n\n{REPLY}")],
    "2:output-reply": lambda t: [*_read(t), user(f"Output:\n{t['note']}\n\n{REPLY}")],
}


def tasks(first: int, n: int) -> list[dict[str, str]]:
    """Easy ``shell-lookup`` tasks: the pointer path, the task in it, the reference command."""
    out = []
    for seed in range(first, first + n):
        task = generators.generate("shell-lookup", seed, generators.tier_difficulty("easy", seed))
        path = re.search(r"`(/app/[^`]+)`", task.instruction)
        assert path, task.instruction
        out.append(
            {
                "instruction": task.instruction.strip(),
                "path": path.group(1),
                "note": task.workspace[path.group(1).removeprefix("/app/")].strip(),
                "reference": task.solution["solve.sh"].strip().splitlines()[-1],
            }
        )
    return out


def _norm(command: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"['\"]", "", command.strip()))


def good(variant: str, content: str | None, t: dict[str, str]) -> bool:
    blocks = parse_actions(content, bare_fences=True)
    if len(blocks) != 1:
        return False
    if variant.startswith("1:"):
        return any(line.strip() == f"cat {t['path']}" for line in blocks[0].splitlines())
    command, ref = _norm(blocks[0]), _norm(t["reference"]).split()
    patterns = {
        "mkdir": r"mkdir (-p )?" + re.escape(ref[-1]) + "/?",
        "echo": r"echo " + re.escape(ref[1]) + r" ?> ?" + re.escape(ref[-1]),
        "rm": r"rm (-f )?" + re.escape(ref[-1]),
    }
    return bool(re.fullmatch(patterns[ref[0]], command))


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--tasks", type=int, default=8)
    p.add_argument("--first-seed", type=int, default=100_000)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--samples", type=int, default=1, help="responses per task and variant")
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--show", type=int, default=3, help="responses printed per variant")
    args = p.parse_args()
    names = args.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        p.error(f"unknown variant(s) {unknown}: pick from {sorted(VARIANTS)}")
    sampling = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature)
    jobs: list[tuple[str, dict[str, str]]] = [
        (name, t)
        for name in names
        for t in tasks(args.first_seed, args.tasks)
        for _ in range(args.samples)
    ]
    async with HFLocalPolicy("smollm2-135m", max_batch_size=len(jobs)) as policy:
        start = time.perf_counter()
        responses: list[Any] = await asyncio.gather(
            *(
                policy.complete(LLMRequest(messages=VARIANTS[name](t), sampling=sampling))
                for name, t in jobs
            )
        )
    took = time.perf_counter() - start
    print(f"{len(jobs)} responses at temperature {args.temperature:g} in {took:.0f} s")
    for name in names:
        mine = [(t, r.content) for (n, t), r in zip(jobs, responses, strict=True) if n == name]
        print(f"{name}: {sum(good(name, c, t) for t, c in mine)} / {len(mine)}")
        for _, content in mine[: args.show]:
            print(f"    {content!r:.160}")


if __name__ == "__main__":
    asyncio.run(main())
