"""``export``: a run's final episodes, with their steps, for training pipelines and other tools.

Three formats: ``jsonl`` and ``parquet`` (one record per episode: the ``episodes`` columns,
``run_policy``, ``run_env_id`` and ``steps_detail``, each a file), and ``atif`` (one Agent
Trajectory Interchange Format document per episode in a directory: :mod:`palaestra.run.atif`).
Blocking: call from a thread in async code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from palaestra.run.atif import write_atif
from palaestra.run.store import read_episodes, read_run, read_steps

FORMATS = ("jsonl", "parquet", "atif")


def default_target(run_dir: Path | str, fmt: str) -> Path:
    """Where ``fmt`` goes without ``-o``: ``RUN_DIR/episodes.FMT``, or ``RUN_DIR/atif/``."""
    return Path(run_dir) / ("atif" if fmt == "atif" else f"episodes.{fmt}")


def export(run_dir: Path | str, out: Path | str, fmt: str) -> int:
    """Write the final episodes with their steps to ``out``; return how many.

    ``out`` is a file for ``jsonl`` and ``parquet``, a directory for ``atif``.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose jsonl, parquet or atif")
    if fmt == "atif":
        return write_atif(run_dir, out)
    records = _records(run_dir)
    out = Path(out)
    if fmt == "jsonl":
        with out.open("w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
        return len(records)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError(
            "Parquet export needs pyarrow: pip install 'palaestra[parquet]'"
        ) from None
    # Nested JSON-ish columns (rewards, steps) are stored as JSON strings: their keys differ
    # between tasks, which a fixed Parquet schema cannot hold as structs.
    flat = [
        {**r, "rewards": json.dumps(r["rewards"]), "steps_detail": json.dumps(r["steps_detail"])}
        for r in records
    ]
    pq.write_table(pa.Table.from_pylist(flat), out)
    return len(records)


def _records(run_dir: Path | str) -> list[dict[str, Any]]:
    run = read_run(run_dir)
    steps = read_steps(run_dir)
    records = []
    for ep in read_episodes(run_dir):
        turns = [{k: v for k, v in s.items() if k != "episode"} for s in steps.get(ep["id"], [])]
        records.append(
            {**ep, "run_policy": run["policy"], "run_env_id": run["env_id"], "steps_detail": turns}
        )
    return records
