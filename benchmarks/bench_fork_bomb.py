"""A fork bomb in the agent's program, measured: the verifier's wall time from start to its
reward, beside the same task solved, on one backend. Prints figures; asserts nothing.

    PYTHONPATH=src:. .venv/bin/python benchmarks/bench_fork_bomb.py --backend local
    PYTHONPATH=src:. .venv/bin/python benchmarks/bench_fork_bomb.py --backend docker

The task is ``tests/sandbox/test_hostile_jail_ends.py``'s (stock-ledger: three runs of
``/app/ledger.py``), its ``ledger.py`` replaced by the bomb (every process forks while it can).
Each of the three runs must end, as "more than 256 processes at once", and the checker write
reward 0 itself: before the jail froze a run's tree (issue 29) the verifier hit its 120 s
timeout (an episode error, no reward).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

# the hostile tests' task and episode runner, from the repository's tests/ (run from a checkout)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.sandbox.test_hostile_jail_ends import EXHAUST, _task  # noqa: E402
from tests.sandbox.test_hostile_rewards import play  # noqa: E402

from palaestra.sandbox import SandboxBackend


def _backend(name: str) -> SandboxBackend:
    if name == "docker":
        from palaestra.sandbox.docker import DockerBackend

        return DockerBackend()
    from palaestra.sandbox.local import LocalBackend

    return LocalBackend()


async def _measure(backend_name: str) -> None:
    backend = _backend(backend_name)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            task, solve = _task(Path(tmp))
            bomb = f"cat > /app/ledger.py <<'EOF_EXHAUST'\n{EXHAUST['fork-bomb']}EOF_EXHAUST"
            for name, script in (("solved", solve), ("fork-bomb", bomb)):
                start = time.monotonic()
                episode = await play(backend, task, script)
                verifier = episode.end.verifier
                took = verifier.duration_s if verifier is not None else float("nan")
                print(
                    f"{backend_name} {name}: reward {episode.reward}, status "
                    f"{episode.end.status}, verifier {took:.1f} s, episode "
                    f"{time.monotonic() - start:.1f} s"
                )
    finally:
        await backend.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("local", "docker"), default="local")
    asyncio.run(_measure(parser.parse_args().backend))


if __name__ == "__main__":
    main()
