"""The one machine-readable line every benchmark prints last, for ``benchmarks/run_all.py``.

``headline("env", step_p50_us=51.2, ...)`` prints ``BENCH {"bench": "env", "step_p50_us": 51.2}``;
the runner reads the last such line of each script's output into its summary table.
"""

from __future__ import annotations

import json

PREFIX = "BENCH "


def headline(bench: str, **figures: float | str | None) -> None:
    print(PREFIX + json.dumps({"bench": bench, **figures}), flush=True)
