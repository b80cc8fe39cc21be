"""``palaestra tasks synth SOURCE -o DIR``: SWE-style bug-fix tasks from a real Python project.

Each step prints a line as it starts and one with what it found; the candidates step keeps a
live count. A re-run with the same ``-o`` skips finished work. Bad input (an unknown package,
no sdist, no tests in it, C extensions, a suite that does not run offline) is one line naming
the problem and the fix (docs/swe-synth.md).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from palaestra.cli_errors import fail
from palaestra.env.registry import check_policy, make_policy
from palaestra.llm.types import LLMRequest, SamplingParams
from palaestra.run.synth_vet import vet
from palaestra.tasks.synth import SynthError
from palaestra.tasks.synth.pipeline import Options, synthesise

console = Console(highlight=False)


#: Tokens a writer may spend on one instruction (an issue's text; a template is ~300).
WRITER_MAX_TOKENS = 768


class PolicyWriter:
    """Asks a policy (``openai:MODEL``, ``hf:MODEL``) to rewrite each instruction, greedily.

    Every request runs on this writer's own event loop, so that the policy (its HTTP client,
    an ``hf:`` policy's worker thread) lives on one loop and is closed on it by :meth:`close`.
    Call from a thread with no running loop."""

    def __init__(self, name: str, *, max_tokens: int = WRITER_MAX_TOKENS) -> None:
        self.policy = make_policy(name)
        self.max_tokens = max_tokens
        self._loop = asyncio.new_event_loop()

    def __call__(self, prompt: str) -> str:
        request = LLMRequest(
            messages=[{"role": "user", "content": prompt}],
            sampling=SamplingParams(max_tokens=self.max_tokens, temperature=0.0),
        )
        response = self._loop.run_until_complete(self.policy.complete(request))
        return response.content or ""

    def close(self) -> None:
        aclose = getattr(self.policy, "aclose", None)
        if aclose is not None:
            self._loop.run_until_complete(aclose())
        self._loop.close()


def _writer(name: str) -> PolicyWriter:
    """The ``--writer`` policy, checked: a model, never ``oracle`` or ``nop``."""
    try:
        check_policy(name)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--writer") from None
    if name in ("oracle", "nop"):
        raise typer.BadParameter(
            "the writer must be a model: openai:MODEL or hf:MODEL", param_hint="--writer"
        )
    return PolicyWriter(name)


def synth(
    source: Annotated[
        str,
        typer.Argument(
            help="A PyPI package name (its sdist, which carries "
            "its tests), name==version, or a local git directory."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where the tasks go.")],
    candidates: Annotated[int, typer.Option(help="Candidate bugs to try.")] = 200,
    seed: Annotated[int, typer.Option(help="Which sites are tried (deterministic).")] = 0,
    pairs: Annotated[
        float, typer.Option(help="Two-site bugs to try, as a share of the kept one-site bugs.")
    ] = 0.25,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Candidates tried at once.")] = 1,
    max_tasks: Annotated[int | None, typer.Option(help="Write at most N tasks.")] = None,
    image: Annotated[
        bool, typer.Option(help="Build the tasks' Docker image (needed to run them).")
    ] = True,
    writer: Annotated[
        str | None,
        typer.Option(
            help="Rewrite each instruction with this policy "
            "(openai:MODEL); template text otherwise."
        ),
    ] = None,
) -> None:
    """Turn a real Python project into validated SWE-style bug-fix tasks (Harbor format)."""
    if candidates < 1 or jobs < 1 or not 0 <= pairs <= 1:
        raise typer.BadParameter("--candidates and -j take N >= 1, --pairs a share in [0, 1]")
    rewrite = _writer(writer) if writer else None
    options = Options(
        seed=seed,
        candidates=candidates,
        pairs=pairs,
        workers=jobs,
        image=image,
        max_tasks=max_tasks,
        rewrite=rewrite,
        vet=vet if image else None,
    )
    live = console.is_terminal

    def progress(done: int, total: int, kept: int) -> None:
        line = f"  tried {done}/{total}, kept {kept}"
        if live:
            console.print(line, end="\r")
        elif done == total or done % max(1, total // 10) == 0:
            console.print(line)

    try:
        manifest = synthesise(
            source, out, options, say=lambda line: console.print(escape(line)), progress=progress
        )
    except SynthError as e:
        fail(str(e))
    finally:
        if rewrite is not None:
            rewrite.close()
    stats = manifest.stats
    dropped = ", ".join(f"{n} {why}" for why, n in sorted(stats["dropped"].items())) or "none"
    console.print(
        f"{len(manifest.tasks)} tasks in {out} (dropped: {dropped}); manifest "
        f"{out / 'manifest.json'}. Check them: palaestra tasks check {out} -j 2"
    )
