"""One command in a sandbox: :class:`Command` as a backend runs it, :class:`ExecResult` as it
comes back."""

from __future__ import annotations

from dataclasses import dataclass, field

#: Default cap on captured output per stream (bytes); output beyond it is dropped and
#: :attr:`ExecResult.truncated` is set.
DEFAULT_OUTPUT_LIMIT = 1 << 20


@dataclass(frozen=True)
class ExecResult:
    """The result of one command.

    ``exit_code`` is the command's status, or ``-signal`` when a signal ended it, or ``None``
    when it was killed for exceeding its timeout (then ``timed_out`` is True and stdout/stderr
    hold what it printed before). ``truncated`` is True when either stream hit the output cap.
    ``oom_killed`` is True when the kernel's out-of-memory killer ended a process of the command
    because the sandbox hit its memory limit (then ``exit_code`` is -9, or 137 through a shell).
    """

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool = False
    duration_s: float = 0.0
    truncated: bool = False
    oom_killed: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def output(self) -> str:
        """stdout and stderr together, stdout first (what a terminal user would read)."""
        if self.stdout and self.stderr:
            sep = "" if self.stdout.endswith("\n") else "\n"
            return self.stdout + sep + self.stderr
        return self.stdout or self.stderr


@dataclass(frozen=True)
class Command:
    """One command of :meth:`Sandbox.exec` as a backend runs it: ``argv`` (a string command
    became ``bash -c`` it), ``stdin`` as bytes (None: no input), ``env`` added to the
    sandbox's; the rest as :meth:`Sandbox.exec` takes them."""

    argv: list[str]
    timeout: float | None = None
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    user: str | int | None = None
    stdin: bytes | None = None
    output_limit: int = DEFAULT_OUTPUT_LIMIT
