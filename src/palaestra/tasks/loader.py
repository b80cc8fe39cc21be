"""Loading Harbor task directories, and the checks a task passes on the way.

A Harbor task is a directory::

    task.toml          configuration (:mod:`palaestra.tasks.config`)
    instruction.md     what the agent is asked to do
    environment/       Dockerfile (or docker-compose.yaml), or task.toml names a docker_image
    tests/test.sh      the verifier: writes /logs/verifier/reward.json or reward.txt
    solution/solve.sh  optional reference solution (what the oracle policy runs)

The directory rules are Harbor's ``Task``/``TaskPaths``: the task needs ``instruction.md`` and
``tests/test.sh`` (a multi-step task: ``steps/<name>/instruction.md`` for each step, with a
portable name, and its ``steps/<name>/tests/test.sh`` or the shared one), an environment
definition (``docker_image``, ``environment/Dockerfile`` or ``environment/docker-compose.yaml``),
and nothing under ``tests/``, ``solution/`` or ``steps/`` may link outside the task; the
instruction has its leading canary lines removed, as Harbor shows it to
agents.

The rules a task must pass beyond its schema (where palaestra is stricter than Harbor) are
:mod:`palaestra.tasks.load_checks`.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
import warnings
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from palaestra.tasks.config import TaskConfig
from palaestra.tasks.errors import TaskError, toml_syntax_error, validation_errors
from palaestra.tasks.load_checks import (
    duplicate_steps,
    links_leaving,
    metadata_errors,
    unknown_keys,
    unsupported,
)
from palaestra.tasks.task import Task

_CANARY_LINE = re.compile(r"^(<!--.*canary.*-->|#.*canary.*)$", re.IGNORECASE)


def load_task(path: Path | str, *, task_id: str | None = None) -> Task:
    """Load and check the Harbor task in directory ``path``.

    ``task_id`` defaults to the directory name. Every problem found is reported at once: one
    :class:`TaskError`, listing them in its ``errors`` when there are several. Keys Harbor does
    not know are ignored with a ``UserWarning``; deprecated spellings are converted with a
    ``DeprecationWarning``.
    """
    task_dir = Path(path).expanduser().resolve()
    if not task_dir.is_dir():
        raise TaskError(
            task_dir,
            "is not a directory" if task_dir.exists() else "no such task directory",
            fix="pass a task directory (task.toml, instruction.md, environment/, tests/test.sh)",
        )
    problems: list[TaskError] = []
    config = _load_config(task_dir / "task.toml", problems)
    step_configs = (config.steps or []) if config is not None else []
    instruction = None
    if not step_configs or (task_dir / "instruction.md").exists():  # a step has its own
        instruction = _load_instruction(task_dir / "instruction.md", problems)
    steps = [(s.name, _load_step(task_dir, s.name, problems)) for s in step_configs]
    problems += duplicate_steps(task_dir / "task.toml", [s.name for s in step_configs])
    test_sh = task_dir / "tests" / "test.sh"
    if not test_sh.is_file() and (
        not steps
        or not all((task_dir / "steps" / n / "tests" / "test.sh").is_file() for n, _ in steps)
    ):
        problems.append(
            TaskError(
                test_sh,
                "is missing; the verifier runs it to compute the reward",
                fix="add tests/test.sh that writes a number to /logs/verifier/reward.txt (or a JSON "
                "object of numbers to /logs/verifier/reward.json)"
                + ("; a step may have its own steps/<name>/tests/test.sh" if steps else ""),
            )
        )
    if config is not None:
        problems += unsupported(task_dir / "task.toml", config)
        environment_dir = task_dir / "environment"
        if not (
            config.environment.docker_image
            or (environment_dir / "Dockerfile").is_file()
            or (environment_dir / "docker-compose.yaml").is_file()
        ):
            problems.append(
                TaskError(
                    environment_dir / "Dockerfile",
                    "is missing, and [environment] sets no docker_image",
                    fix='add environment/Dockerfile (for example "FROM ubuntu:24.04" then '
                    '"WORKDIR /app"), or set docker_image = "<image>" under [environment]',
                )
            )
    problems += links_leaving(task_dir, ("tests", "solution", "steps"))
    if problems:
        raise _one_error(task_dir, problems)
    assert config is not None
    first = instruction if instruction is not None else steps[0][1]
    assert first is not None
    task = Task(id=task_id or task_dir.name, path=task_dir, config=config, instruction=first)
    return dataclasses.replace(
        task, steps=tuple(task.with_step(name, text or "") for name, text in steps)
    )


def load_tasks(root: Path | str, *, errors: Literal["raise", "skip"] = "raise") -> list[Task]:
    """Load the task in ``root``, or every task directly under it, sorted by directory name.

    ``root`` is a task when it holds ``task.toml`` or ``instruction.md``; otherwise each such
    subdirectory is one (so a task missing only its task.toml is reported, not passed over), and
    other subdirectories are not tasks. With ``errors="raise"`` every task is checked, then one
    :class:`TaskError` lists all that failed; with ``errors="skip"`` those are left out, each
    with a warning (Harbor passes over invalid task directories silently). A single task that
    fails to load always raises.
    """
    if errors not in ("raise", "skip"):
        raise ValueError(f"errors must be 'raise' or 'skip', got {errors!r}")
    tasks, failed = scan_tasks(root)
    if failed and errors == "raise":
        raise TaskError(
            Path(root).expanduser().resolve(),
            f"{len(failed)} of {len(tasks) + len(failed)} tasks could not be loaded",
            fix='correct them, or pass errors="skip" to load the others',
            errors=[error for _, error in failed],
        )
    for directory, error in failed:
        warnings.warn(f"skipping task {directory.name}: {error}", UserWarning, stacklevel=2)
    return tasks


def scan_tasks(root: Path | str) -> tuple[list[Task], list[tuple[Path, TaskError]]]:
    """The tasks :func:`load_tasks` finds in ``root``, and ``(directory, error)`` for each task
    directory that did not load, without warning or raising for them. A ``root`` that is one
    task, or holds no tasks, still raises."""
    root = Path(root).expanduser().resolve()
    if _looks_like_task(root):
        return [load_task(root)], []
    if not root.is_dir():
        raise TaskError(
            root,
            "no such directory",
            fix="pass a task directory or a directory of task directories",
        )
    candidates = sorted(child for child in root.iterdir() if _looks_like_task(child))
    if not candidates:
        raise TaskError(
            root,
            "holds no tasks (no task.toml in it or in its subdirectories)",
            fix="pass a task directory or a directory of task directories",
        )
    tasks: list[Task] = []
    failed: list[tuple[Path, TaskError]] = []
    for candidate in candidates:
        try:
            tasks.append(load_task(candidate))
        except TaskError as e:
            failed.append((candidate, e))
    return tasks, failed


def _looks_like_task(path: Path) -> bool:
    return path.is_dir() and any(
        (path / name).is_file() for name in ("task.toml", "instruction.md")
    )


# --------------------------------------------------------------------------------------------
# Reading the parts of a task directory (the rules: palaestra.tasks.load_checks)
# --------------------------------------------------------------------------------------------


def _one_error(path: Path, problems: list[TaskError]) -> TaskError:
    if len(problems) == 1:
        return problems[0]
    return TaskError(path, f"{len(problems)} problems", errors=problems)


def _load_config(path: Path, problems: list[TaskError]) -> TaskConfig | None:
    if not path.is_file():
        problems.append(
            TaskError(
                path,
                "is missing",
                fix="create task.toml; an empty file is valid, and most tasks set [agent] "
                "timeout_sec and [verifier] timeout_sec",
            )
        )
        return None
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        problems.append(TaskError(path, "is not UTF-8 text", fix="save task.toml as UTF-8"))
        return None
    except tomllib.TOMLDecodeError as e:
        problems.append(toml_syntax_error(path, e))
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            config = TaskConfig.model_validate(raw)
        except ValidationError as e:
            problems.extend(validation_errors(path, raw, e))
            return None
    for warning in caught:
        warnings.warn(f"{path}: {warning.message}", warning.category, stacklevel=3)
    unknown = unknown_keys(raw, config)
    if unknown:
        warnings.warn(
            f"{path}: ignoring keys Harbor does not know: {', '.join(unknown)}",
            UserWarning,
            stacklevel=3,
        )
    problems.extend(metadata_errors(path, config.metadata))
    return config


def _load_instruction(path: Path, problems: list[TaskError]) -> str | None:
    if not path.is_file():
        problems.append(
            TaskError(path, "is missing", fix="write what the agent must do in instruction.md")
        )
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        problems.append(TaskError(path, "is not UTF-8 text", fix="save instruction.md as UTF-8"))
        return None
    instruction = _strip_canary(text)
    if not instruction.strip():
        problems.append(
            TaskError(path, "is empty", fix="write what the agent must do in instruction.md")
        )
        return None
    return instruction


#: Harbor's portable step names: no separators, controls, reserved characters or device names.
_BAD_STEP_CHARACTERS = re.compile(r'[<>:"/\\|?*\x00-\x1f\x7f]')
_DEVICE_NAME = re.compile(r"^(CON|PRN|AUX|NUL|CONIN\$|CONOUT\$|(?:COM|LPT)[1-9¹²³])$", re.I)


def _load_step(task_dir: Path, name: str, problems: list[TaskError]) -> str | None:
    """Step ``name``'s instruction (``steps/<name>/instruction.md``), its name checked."""
    if (
        not name.strip()
        or name in {".", ".."}
        or name.endswith((".", " "))
        or _BAD_STEP_CHARACTERS.search(name)
        or _DEVICE_NAME.fullmatch(name.partition(".")[0].rstrip(" "))
        or len(name.encode()) > 255
    ):
        problems.append(
            TaskError(
                task_dir / "task.toml",
                f"step name {name!r} is not a portable directory name",
                field="steps",
                fix="use letters, digits, '-', '_' and '.' (not at the end), at most 255 bytes",
            )
        )
        return None
    return _load_instruction(task_dir / "steps" / name / "instruction.md", problems)


def _strip_canary(text: str) -> str:
    """Harbor's ``strip_canary``: drop leading canary comment lines and the blanks after them."""
    lines = text.split("\n")
    i = 0
    while i < len(lines) and _CANARY_LINE.match(lines[i].strip()):
        i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    return "\n".join(lines[i:])
