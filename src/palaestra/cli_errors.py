"""How the ``palaestra`` command ends: one line for a mistake, the same clean stop for SIGTERM
as for Ctrl-C.

An ordinary mistake (an unknown id, a bad option value, a missing extra) is one line on
stderr, ``error: ...``, and exit code 2: :class:`OneLineErrors` prints every usage error so,
instead of click's usage lines and box, and commands raise :class:`CliError` for theirs. The
message is printed as plain text (never as console markup), so install hints keep their extra:
``pip install 'palaestra[ray]'``.

:func:`run_async` is ``asyncio.run`` with SIGTERM handled as Ctrl-C is: the main task is
cancelled, so every sandbox is closed and a run is recorded as interrupted, then
:class:`Terminated` is raised for the command to say so and exit 143.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Coroutine
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup

T = TypeVar("T")

#: The exit code of a command stopped by SIGTERM (128 + 15, as a shell reports it).
SIGTERM_EXIT = 128 + signal.SIGTERM


class CliError(typer.TyperException):
    """A mistake the user can fix: printed as one line, exit code 2."""

    exit_code = 2


def fail(message: str) -> NoReturn:
    raise CliError(message)


def say_error(message: str) -> None:
    """``error: message`` on stderr, as one line (whitespace runs and newlines folded)."""
    err = Console(stderr=True, soft_wrap=True, highlight=False)
    err.print(Text.assemble(("error:", "bold red"), " ", " ".join(message.split())))


class OneLineErrors(TyperGroup):
    """The top-level group: usage errors and :class:`CliError` become one line on stderr."""

    def main(  # type: ignore[override]
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except typer.TyperException as e:  # click's exceptions, as typer vendors them, and ours
            if type(e).__name__ != "NoArgsIsHelpError":  # that one's help is already printed
                ctx = getattr(e, "ctx", None)  # a usage error: say where the usage is
                message = e.format_message().rstrip(".")
                if ctx is not None and "`" not in message:  # no fix named yet: the help has it
                    message += f" (see `{ctx.command_path} --help`)"
                say_error(message)
            sys.exit(e.exit_code)
        except typer.Abort:
            say_error("aborted")
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


class Terminated(Exception):
    """The command got SIGTERM; what it ran was stopped as Ctrl-C stops it."""


async def _until_sigterm(main: Coroutine[Any, Any, T]) -> T:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    got: list[bool] = []

    def on_sigterm() -> None:
        got.append(True)
        task.cancel()

    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        return await main
    except asyncio.CancelledError:
        if not got:
            raise
        task.uncancel()
        raise Terminated from None
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def run_async(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``; SIGTERM cancels it as Ctrl-C does and raises :class:`Terminated`."""
    return asyncio.run(_until_sigterm(main))
