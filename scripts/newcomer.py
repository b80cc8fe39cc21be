#!/usr/bin/env python3
"""The newcomer test: the README's commands, in order, on a fresh clone.

    python3 scripts/newcomer.py [--setup reuse|fresh|none] [--venv PATH] [--report FILE] [--keep]

Every ```bash and ```python block of README.md carries a marker in the HTML comment just above
it, so no command can be added without saying how it is checked:

    <!-- newcomer: demo -->                 run with the demo install (what `make demo` made)
    <!-- newcomer: setup -->                run with the full set-up (what `make setup` makes)
    <!-- newcomer: skip: REASON -->         not run (a model server, a GPU, the suite itself)

A marker may add `; prints "TEXT"` (a python block's expected output). In a bash block each line
is one command; its trailing comment states what it should do: `exits N` (otherwise 0) and
`prints "TEXT"` (each quoted text after `prints` must appear in its output, in order). Lines that
set the shell's state (`. .venv/bin/activate`, `export`, `cd`) carry over to later commands.

The repository is cloned (`git clone --shared`) at HEAD, or at the working tree's tracked state
when it has uncommitted changes, into a temporary directory. The demo commands run there after a
real `make demo` (a fresh venv: that command is the README's own). For the full set-up,
`--setup fresh` runs `make setup` in the clone (torch and the dev extra: many minutes);
`--setup reuse` (the default; what the test suite does) reuses an existing full venv (`--venv`,
default: the one running this script), linked as the clone's `.venv`, with PYTHONPATH at the
clone's `src/` so the clone's code is what runs; `--setup none` reports those commands not run.
Each command runs in its own process group, with a time limit; anything it leaves running is
killed and makes it fail. Exit 0 when every command run did what the README says, 1 otherwise,
2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"<!--\s*newcomer:\s*(?P<body>.*?)\s*-->", re.S)
FENCE = re.compile(r"^```(?P<lang>\w*)\s*$")
STATE = re.compile(r"^(\.|source|export|cd)\s")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
RUN_LANGS = {"bash", "sh", "shell", "python"}
COMMAND_LIMIT_S = 900


@dataclass
class Command:
    """One README command and what the README says it does."""

    text: str
    lang: str
    mode: str  # demo | setup | skip
    line: int
    reason: str = ""
    exit_code: int = 0
    prints: list[str] = field(default_factory=list)


@dataclass
class Result:
    command: str
    mode: str
    line: int
    status: str  # ok | failed | not run
    exit_code: int | None = None
    expected_exit: int = 0
    seconds: float = 0.0
    problem: str = ""


class ReadmeError(Exception):
    """The README's markup is wrong (a block without a marker, an unknown mode)."""


def _split_comment(line: str) -> tuple[str, str]:
    """`cmd  # comment` -> (cmd, comment); a # inside quotes or a word is not a comment."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def _expectations(text: str) -> tuple[int, list[str]]:
    exits = re.search(r"\bexits (\d+)", text)
    after = text.split("prints", 1)
    prints = re.findall(r'"([^"]+)"', after[1]) if len(after) == 2 else []
    return (int(exits.group(1)) if exits else 0), prints


def _parse_marker(body: str, line: int) -> tuple[str, str, int, list[str]]:
    head, _, options = body.partition(";")
    mode, _, reason = head.partition(":")
    mode, reason = mode.strip(), reason.strip()
    if mode not in ("demo", "setup", "skip"):
        raise ReadmeError(f"README.md:{line}: unknown newcomer mode {mode!r} (demo, setup, skip)")
    if mode == "skip" and not reason:
        raise ReadmeError(f"README.md:{line}: `newcomer: skip` needs a reason (skip: REASON)")
    exit_code, prints = _expectations(options)
    return mode, reason, exit_code, prints


def parse_readme(text: str) -> list[Command]:
    """The README's commands in order, each with its mode and expectations."""
    lines = text.splitlines()
    commands: list[Command] = []
    marker: tuple[str, str, int, list[str]] | None = None
    i = 0
    while i < len(lines):
        found = MARKER.search(lines[i])
        fence = FENCE.match(lines[i])
        if found:
            marker = _parse_marker(found.group("body"), i + 1)
        elif fence and fence.group("lang"):
            lang, start = fence.group("lang"), i + 1
            end = start
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            body = lines[start:end]
            if lang in RUN_LANGS:
                if marker is None:
                    raise ReadmeError(
                        f"README.md:{start}: a ```{lang} block without a marker: put"
                        " <!-- newcomer: demo|setup|skip: REASON --> on the line above it"
                    )
                commands += _block_commands(lang, body, start + 1, marker)
            marker = None
            i = end
        elif lines[i].strip():
            marker = None  # a marker belongs to the block right below it
        i += 1
    return commands


def _block_commands(
    lang: str, body: list[str], first_line: int, marker: tuple[str, str, int, list[str]]
) -> list[Command]:
    mode, reason, exit_code, prints = marker
    if lang == "python":
        return [Command("\n".join(body), "python", mode, first_line, reason, exit_code, prints)]
    commands = []
    pending, pending_line = "", first_line
    for offset, raw in enumerate(body):
        if not pending:
            pending_line = first_line + offset
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        command, comment = _split_comment(pending + raw)
        pending = ""
        if not command.strip():
            continue
        code, texts = _expectations(comment)
        commands.append(Command(command.strip(), "bash", mode, pending_line, reason, code, texts))
    return commands


def _clone(destination: Path) -> str:
    """A fresh clone at HEAD, or at the tracked state of a work tree with uncommitted changes."""
    git = ["git", "-C", str(ROOT)]
    revision = subprocess.run(git + ["stash", "create"], capture_output=True, text=True).stdout
    revision = revision.strip() or subprocess.check_output(git + ["rev-parse", "HEAD"], text=True)
    revision = revision.strip()
    subprocess.run(
        ["git", "clone", "-q", "--shared", "--no-checkout", str(ROOT), str(destination)], check=True
    )
    subprocess.run(
        ["git", "-C", str(destination), "checkout", "-q", "--detach", revision], check=True
    )
    return revision


def _environment(pythonpath: str | None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    for key in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        env.pop(key, None)
    # the caller's venv (pytest's) leaves the PATH as a newcomer's shell would have it
    if sys.prefix != sys.base_prefix:
        own = str(Path(sys.prefix) / "bin")
        env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != own)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def _run(command: Command, clone: Path, state: list[str], env: dict[str, str]) -> Result:
    result = Result(command.text, command.mode, command.line, "ok")
    result.expected_exit = command.exit_code
    script = command.text
    if command.lang == "python":
        path = clone / ".newcomer" / f"readme-line-{command.line}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(command.text + "\n")
        script = f"python {path}"
    started = time.monotonic()
    proc = subprocess.Popen(
        ["bash", "-c", "\n".join([*state, script])],
        cwd=clone,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=COMMAND_LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        result.problem = f"still running after {COMMAND_LIMIT_S} s"
    result.seconds = round(time.monotonic() - started, 1)
    result.exit_code = proc.returncode
    if _group_alive(proc.pid):
        os.killpg(proc.pid, signal.SIGKILL)
        result.problem = result.problem or "left processes running (killed)"
    output = ANSI.sub("", output)
    flat = " ".join(output.split())
    if not result.problem and proc.returncode != command.exit_code:
        result.problem = f"exit {proc.returncode}, the README says {command.exit_code}"
    position = 0
    for text in command.prints:
        found = flat.find(" ".join(text.split()), position)
        if found < 0 and not result.problem:
            result.problem = f'no "{text}" in its output'
        position = max(position, found + len(" ".join(text.split())))
    if result.problem:
        result.status = "failed"
        tail = output.strip().splitlines()[-8:]
        result.problem += "".join(f"\n         | {line[:160]}" for line in tail)
    if STATE.match(command.text) and command.lang == "bash":
        state.append(command.text)
    return result


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _full_setup(how: str, venv: Path, clone: Path, env: dict[str, str]) -> tuple[str, dict | None]:
    """Brings in the full set-up before the first `setup` command; returns a line saying how."""
    if how == "none":
        return "full set-up: none (--setup none): its commands are not run", None
    if how == "fresh":
        started = time.monotonic()
        proc = subprocess.run(["make", "setup"], cwd=clone, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-5:]
            raise RuntimeError("`make setup` failed in the clone: " + " | ".join(tail))
        return f"full set-up: `make setup` in the clone, {time.monotonic() - started:.1f} s", env
    demo_venv = clone / ".venv"
    if demo_venv.exists() and not demo_venv.is_symlink():
        demo_venv.rename(clone / ".venv-demo")
    demo_venv.symlink_to(venv)
    return (
        f"full set-up: reusing {venv} (linked as .venv; PYTHONPATH={clone}/src)",
        _environment(str(clone / "src")),
    )


def run(setup: str, venv: Path, keep: bool) -> list[Result]:
    commands = parse_readme((ROOT / "README.md").read_text())
    clone = Path(tempfile.mkdtemp(prefix="palaestra-newcomer-"))
    results: list[Result] = []
    try:
        started = time.monotonic()
        revision = _clone(clone / "palaestra")
        clone = clone / "palaestra"
        print(f"newcomer: {len(commands)} README commands; clone of {revision[:12]} in {clone}")
        env, state, full = _environment(None), [], False
        for command in commands:
            if command.mode == "skip" or (command.mode == "setup" and env is None):
                results.append(Result(command.text, command.mode, command.line, "not run"))
                results[-1].problem = command.reason or "no full set-up (--setup none)"
            else:
                if command.mode == "setup" and not full:
                    line, env = _full_setup(setup, venv, clone, env)
                    full = True
                    print(line)
                    if env is None:
                        results.append(Result(command.text, command.mode, command.line, "not run"))
                        results[-1].problem = "no full set-up (--setup none)"
                        continue
                results.append(_run(command, clone, state, env))
                if command.text.startswith("make demo") and results[-1].status == "ok":
                    elapsed = time.monotonic() - started
                    print(f"first passing `make demo`: {elapsed:.1f} s after the clone began")
            _print(results[-1])
    finally:
        if keep:
            print(f"kept: {clone}")
        else:
            shutil.rmtree(clone.parent if clone.name == "palaestra" else clone, True)
    return results


def _print(result: Result) -> None:
    first = result.command.splitlines()[0] + (" ..." if "\n" in result.command else "")
    tag = {"ok": "ok    ", "failed": "FAILED", "not run": "skip  "}[result.status]
    timing = f" ({result.seconds} s)" if result.status != "not run" else ""
    problem = f": {result.problem}" if result.problem else ""
    print(f"{tag} {result.mode:<5} README.md:{result.line} {first}{timing}{problem}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="The README's commands, in order, on a fresh clone."
    )
    parser.add_argument("--setup", choices=("reuse", "fresh", "none"), default="reuse")
    parser.add_argument("--venv", type=Path, default=Path(sys.prefix))
    parser.add_argument("--report", type=Path, help="write the results as JSON to this file")
    parser.add_argument("--keep", action="store_true", help="keep the clone")
    args = parser.parse_args(argv)
    if args.setup == "reuse" and not (args.venv / "bin" / "palaestra").exists():
        print(
            f"newcomer: {args.venv} has no palaestra: pass --venv PATH of a full set-up",
            file=sys.stderr,
        )
        return 2
    try:
        results = run(args.setup, args.venv.absolute(), args.keep)
    except ReadmeError as error:
        print(f"newcomer: {error}", file=sys.stderr)
        return 2
    counts = {
        status: sum(r.status == status for r in results) for status in ("ok", "failed", "not run")
    }
    run_count = counts["ok"] + counts["failed"]
    print(
        f"newcomer: {run_count} commands run, {counts['ok']} as the README says,"
        f" {counts['failed']} not; {counts['not run']} not run"
    )
    if args.report:
        args.report.write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
