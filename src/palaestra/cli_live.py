"""The live part of ``palaestra eval``: the progress bar's fields and the scalar streams
(``--scalars``, ``--tensorboard``), fed by each stored try."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import Progress, TaskID

from palaestra.cli_summary import pct, usd
from palaestra.env.types import EpisodeStatus
from palaestra.run.evaluate import EpisodeRecord
from palaestra.run.scalars import JsonlScalarWriter, ScalarStream
from palaestra.run.tensorboard import ScalarWriter


class Live:
    """Progress bar fields and the scalar streams (--scalars, --tensorboard), fed by each try.

    The counts start from the tries already in the store (``prior``), so a resumed run's bar,
    rates and scalar steps continue where the last invocation stopped; episodes per second
    count this invocation's episodes. The streams only queue each point: their files are
    written by threads of their own, never on the event loop.
    """

    def __init__(
        self,
        progress: Progress,
        bar: TaskID,
        streams: dict[str, ScalarStream],
        prior: list[EpisodeRecord],
    ) -> None:
        self.progress, self.bar, self.streams = progress, bar, streams
        self.done = self.passed = self.errors = self.unknown_cost = self.new = 0
        self.cost: float | None = None
        for record in prior:
            self._count(record)
        self.started = time.perf_counter()

    def fields(self) -> dict[str, str]:
        elapsed = time.perf_counter() - self.started
        cost = "cost unknown" if self.cost is None else usd(self.cost)
        if self.cost is not None and self.unknown_cost:
            cost += f" (+{self.unknown_cost} unknown)"
        return {
            "rate": pct(self.passed / self.done) if self.done else "-",
            "errors": str(self.errors),
            "cost": cost,
            "speed": f"{self.new / elapsed:.2f}" if elapsed > 0 else "-",
        }

    def _count(self, record: EpisodeRecord) -> bool:
        """Add one stored try to the counts; whether it is final (the one that counts)."""
        if record.get("cost_usd") is not None:
            self.cost = (self.cost or 0.0) + record["cost_usd"]
        else:
            self.unknown_cost += 1
        if not record["final"]:
            return False
        self.done += 1
        self.passed += record["status"] == EpisodeStatus.PASSED
        self.errors += record["status"] == EpisodeStatus.ERROR
        return True

    def __call__(self, record: EpisodeRecord) -> None:
        if not self._count(record):
            return
        self.new += 1
        self.progress.update(self.bar, completed=self.done, **self.fields())
        point = {
            "pass_rate": self.passed / self.done,
            "error_rate": self.errors / self.done,
            "cost_usd": self.cost,  # None (left out of TensorBoard, null in JSONL) while unknown
            "reward": record["reward"],
            "episodes_per_s": self.new / (time.perf_counter() - self.started),
        }
        for stream in self.streams.values():
            stream.add_scalars(self.done, point)

    def close(self) -> None:
        """Write every queued point; a stream that failed is reported, not raised."""
        for option, stream in self.streams.items():
            try:
                stream.close()
            except OSError as e:
                Console(stderr=True).print(f"[yellow]warning:[/yellow] {option} failed: {e}")


def open_streams(scalars: Path | None, tensorboard: Path | None) -> dict[str, ScalarStream]:
    streams: dict[str, ScalarStream] = {}
    for option, target, opener in (
        ("--scalars", scalars, JsonlScalarWriter),
        ("--tensorboard", tensorboard, ScalarWriter),
    ):
        if target is not None:
            try:
                streams[option] = opener(target)
            except OSError as e:
                for stream in streams.values():
                    stream.close()
                raise typer.BadParameter(f"cannot write {target}: {e}", param_hint=option) from None
    return streams
