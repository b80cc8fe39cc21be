"""The Harbor verifier: run a task's hidden tests in its sandbox and read the reward.

Harbor's semantics, step by step, inside the phase boundary of :mod:`.boundary`:

1. every agent process is killed (nothing the agent left running may touch the result);
2. ``/logs/verifier`` is created afresh, root-owned (the agent cannot plant a reward, nor a
   link to one), and ``/tests`` is emptied and made root-only;
3. ``tests/`` is uploaded to ``/tests`` only now (the agent never saw it; a step of a
   multi-step task gets its ``steps/<name>/tests/`` over it), unless the sandbox
   is a separate verifier's whose image holds ``/tests`` itself
   (:mod:`palaestra.tasks.verifier_env`; the environment layer makes that sandbox and copies
   the agent's artifacts into it: :mod:`palaestra.env.separate`);
4. ``/tests/test.sh`` is made executable and run (its shebang honoured) under the task's
   verifier timeout, with ``[verifier].env`` (``${VAR}`` and ``${VAR:-default}`` resolved from
   the host's environment, as Harbor does);
5. every process in the sandbox is killed again, then ``/logs/verifier/reward.json`` (a flat
   object of numbers) is read first, else ``/logs/verifier/reward.txt`` (one number, stored as
   ``{"reward": x}``), once :func:`.boundary.check_reward_files` found it a regular root-owned
   file that nothing changed after ``test.sh`` exited. Every key is the reward breakdown; the
   reward is :func:`scalar_reward`'s (the ``reward`` key, or the reward kit's dimensions).

A missing, empty or non-numeric reward, a reward file written after ``test.sh`` ended, or a
timeout, is an *error* outcome that keeps the test output, never a silent 0: a broken verifier
must not look like a failing agent.
"""

from __future__ import annotations

import asyncio
import enum
import io
import json
import math
import os
import re
import tarfile
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from palaestra.tasks.paths import REWARD_JSON, REWARD_TXT
from palaestra.verify.boundary import (
    PREPARE_SH,
    RUN_SH,
    STATE_SH,
    SYSTEM_DIRS,
    BoundaryError,
    check_reward_files,
)

if TYPE_CHECKING:
    from palaestra.sandbox.base import Sandbox
    from palaestra.tasks import Task

_OUTPUT_TAIL = 20_000


class VerifierStatus(enum.StrEnum):
    """What the verifier's run came to: a reward (``ok``), or no reward (``error``, ``timeout``)."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"


class RewardFileError(ValueError):
    """A reward file exists but does not hold what Harbor specifies."""


@dataclass
class VerifierResult:
    """What the verifier found. ``reward`` is set only when ``status == "ok"``; ``status`` is
    coerced to :class:`VerifierStatus` (``"error"`` is accepted)."""

    status: VerifierStatus
    reward: float | None = None
    rewards: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    exit_code: int | None = None
    output: str = ""
    duration_s: float = 0.0
    strategy: str = "harbor"
    """The reward strategy that turned ``rewards`` into ``reward`` (:mod:`.strategies`)."""
    error_kind: str | None = None
    """The error class when it is not the verifier's own (``RewardStrategyError``)."""

    def __post_init__(self) -> None:
        self.status = VerifierStatus(self.status)

    @property
    def ok(self) -> bool:
        return self.status is VerifierStatus.OK

    @property
    def error_class(self) -> str | None:
        """The class an episode's error gets when the verifier gave no reward:
        ``VerifierError`` or ``VerifierTimeout``; None when it did."""
        if self.ok:
            return None
        return self.error_kind or f"Verifier{self.status.title()}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_ENV_TEMPLATE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?\}")


def resolve_env_vars(env: dict[str, str]) -> dict[str, str]:
    """Resolve values of the form ``${VAR}`` / ``${VAR:-default}`` from the host environment.

    Raises ``KeyError`` naming the variable when it is unset and has no default.
    """
    resolved = {}
    for key, value in env.items():
        m = _ENV_TEMPLATE.fullmatch(value)
        if m is None:
            resolved[key] = value
        elif m.group(1) in os.environ:
            resolved[key] = os.environ[m.group(1)]
        elif m.group(2) is not None:
            resolved[key] = m.group(2)
        else:
            raise KeyError(
                f"[verifier].env {key} needs the host environment variable {m.group(1)}, which "
                f"is not set; set it, or give a default: ${{{m.group(1)}:-value}}"
            )
    return resolved


def parse_reward_json(text: str) -> dict[str, float]:
    """Parse ``reward.json``: a non-empty flat JSON object whose values are finite numbers."""
    if not text.strip():
        raise RewardFileError(f"{REWARD_JSON} is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise RewardFileError(f"{REWARD_JSON} is not valid JSON: {e}") from e
    if not isinstance(data, dict) or not data:
        raise RewardFileError(
            f"{REWARD_JSON} must be a non-empty JSON object of numbers (Harbor's reward kit "
            "writes {} when it finds no criteria under tests/)"
        )
    rewards: dict[str, float] = {}
    for key, value in data.items():
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise RewardFileError(f"{REWARD_JSON}: {key!r} must be a finite number, got {value!r}")
        rewards[str(key)] = float(value)
    return rewards


def parse_reward_txt(text: str) -> dict[str, float]:
    """Parse ``reward.txt``: exactly one finite number."""
    stripped = text.strip()
    if not stripped:
        raise RewardFileError(f"{REWARD_TXT} is empty")
    try:
        value = float(stripped)
    except ValueError as e:
        raise RewardFileError(f"{REWARD_TXT} must hold one number, got {stripped[:80]!r}") from e
    if not math.isfinite(value):
        raise RewardFileError(f"{REWARD_TXT} must hold a finite number, got {stripped!r}")
    return {"reward": value}


def scalar_reward(
    rewards: dict[str, float], primary: str | None = None, outcomes: frozenset[str] = frozenset()
) -> float:
    """The episode's reward from ``reward.json``'s keys (every key stays in the breakdown).

    The key ``primary`` names (a task's ``[metadata] primary_reward``), else the ``reward``
    key, else the only key there is, else the mean of all keys: Harbor's reward kit writes one
    key per reward dimension (``correctness``, ``quality``, or ``dir/reward`` for several test
    directories) and a ``reward`` key only when the task's ``reward.toml`` combines them; its
    default combination is the equally weighted mean. The outcome keys a task declares
    (``[metadata] reward_outcomes``: counts, flags) are never averaged in.
    """
    if primary is not None:
        if primary not in rewards:
            raise RewardFileError(
                f"{REWARD_JSON} has no {primary!r} key, which [metadata] primary_reward names "
                f"(it has {', '.join(sorted(rewards))}); write that key, or name one of these"
            )
        return rewards[primary]
    if "reward" in rewards:
        return rewards["reward"]
    dimensions = [value for key, value in rewards.items() if key not in outcomes]
    if not dimensions:
        raise RewardFileError(
            f"{REWARD_JSON} holds only outcome keys ({', '.join(sorted(rewards))}) and no "
            "'reward' key; add a 'reward' key holding the episode's reward"
        )
    return sum(dimensions) / len(dimensions)


class HarborVerifier:
    """Runs ``tests/test.sh`` the way Harbor does. Stateless; one instance serves all episodes."""

    async def verify(
        self, task: Task, sandbox: Sandbox, *, timeout: float | None = None
    ) -> VerifierResult:
        started = time.perf_counter()
        await sandbox.kill_all()  # the image's service too, started again for the tests
        changed = await sandbox.changed_paths(SYSTEM_DIRS) if task.sealed_system else []
        if changed:
            shown = ", ".join(changed[:8]) + (
                f" (and {len(changed) - 8} more)" if len(changed) > 8 else ""
            )
            return VerifierResult(
                VerifierStatus.ERROR,
                error=f"the agent changed system paths, so the tests cannot be trusted: {shown}",
                error_kind="SystemTampered",
                duration_s=time.perf_counter() - started,
            )
        separate = task.verifier_environment
        bundled = separate is not None and separate.bundled_tests
        archive = None if bundled else await asyncio.to_thread(_tests_archive, task.test_dirs)
        prep = await sandbox.exec(
            ["sh", "-c", PREPARE_SH, "sh", "keep" if bundled else "fresh"],
            timeout=60,
            stdin=archive,
        )
        if not prep.ok:
            return VerifierResult(
                VerifierStatus.ERROR,
                error=f"could not prepare the verifier: {prep.output.strip()}",
                exit_code=prep.exit_code,
                duration_s=time.perf_counter() - started,
            )
        try:
            env = resolve_env_vars(task.verifier_env)
        except KeyError as e:
            return VerifierResult(
                VerifierStatus.ERROR, error=str(e.args[0]), duration_s=time.perf_counter() - started
            )
        limit = timeout if timeout is not None else task.verifier_timeout_sec
        run = await sandbox.exec(["sh", "-c", RUN_SH], timeout=limit, env=env)
        # before the reward is read: what test.sh started is done, and nothing runs
        await sandbox.kill_all(restart_service=False)
        output = run.output[-_OUTPUT_TAIL:]
        if run.timed_out:
            return VerifierResult(
                VerifierStatus.TIMEOUT,
                error=f"tests/test.sh did not finish within {limit:g} s",
                output=output,
                duration_s=time.perf_counter() - started,
            )
        try:
            state = await sandbox.exec(["sh", "-c", STATE_SH], timeout=60)
            rewards = _parse_rewards(*check_reward_files(state.stdout))
            primary = task.config.metadata.get("primary_reward")
            reward = scalar_reward(rewards, primary, task.reward_outcomes)
        except (RewardFileError, BoundaryError) as e:
            return VerifierResult(
                VerifierStatus.ERROR,
                error=str(e),
                exit_code=run.exit_code,
                output=output,
                duration_s=time.perf_counter() - started,
            )
        return VerifierResult(
            VerifierStatus.OK,
            reward=reward,
            rewards=rewards,
            exit_code=run.exit_code,
            output=output,
            duration_s=time.perf_counter() - started,
        )


def _parse_rewards(kind: str, content: str) -> dict[str, float]:
    """The rewards of the reward file :data:`~.boundary.STATE_SH` found (``json`` first)."""
    if kind == "json":
        return parse_reward_json(content)
    if kind == "txt":
        return parse_reward_txt(content)
    raise RewardFileError(
        f"tests/test.sh wrote no reward: neither {REWARD_JSON} nor {REWARD_TXT} exists"
    )


#: Archives of tests directories by their files' signature (names, modes, sizes, times): a run
#: verifies the same tasks over and over, and a task's tests change only when someone edits
#: them. At most this many, each at most _PACK_CACHE_ITEM bytes.
_PACK_CACHE_SIZE, _PACK_CACHE_ITEM = 64, 1 << 20
_packed: OrderedDict[tuple[object, ...], bytes] = OrderedDict()
_packed_lock = threading.Lock()


def _tests_archive(dirs: tuple[Path, ...]) -> bytes:
    """:func:`_pack_tests` of ``dirs``, from the cache while no file under them changed.
    Blocking."""
    key = (dirs, *(_signature(d) for d in dirs))
    with _packed_lock:
        archive = _packed.get(key)
        if archive is not None:
            _packed.move_to_end(key)
            return archive
    archive = _pack_tests(dirs)
    if len(archive) <= _PACK_CACHE_ITEM:
        with _packed_lock:
            _packed[key] = archive
            while len(_packed) > _PACK_CACHE_SIZE:
                _packed.popitem(last=False)
    return archive


def _signature(directory: Path) -> tuple[tuple[str, int, int, int], ...]:
    """Every path under ``directory`` with its mode, size and modification time (ns)."""
    found = []
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            st = os.lstat(os.path.join(root, name))
            found.append((os.path.join(root, name), st.st_mode, st.st_size, st.st_mtime_ns))
    return tuple(sorted(found))


def _pack_tests(dirs: tuple[Path, ...]) -> bytes:
    """One tar archive of the contents of ``dirs``, in order (a later one's files win), for
    :data:`~.boundary.PREPARE_SH` to unpack into ``/tests``: no entry for the directory itself
    (``/tests`` keeps the owner and mode step 1 gave it), ``test.sh`` executable (a task's
    may not be). Blocking."""

    def executable(member: tarfile.TarInfo) -> tarfile.TarInfo:
        if member.name == "test.sh" and member.isfile():
            member.mode |= 0o755
        return member

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for tests in dirs:
            for child in sorted(tests.resolve(strict=True).iterdir()):
                tar.add(child, arcname=child.name, filter=executable)
    return buf.getvalue()
