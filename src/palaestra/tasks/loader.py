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

Where palaestra differs from Harbor, it is stricter and says why:

* Harbor ignores keys it does not know; so do we, but :func:`load_task` warns about them (a typo
  such as ``timout_sec`` would otherwise silently keep the default).
* Timeouts and resources must be positive (Harbor accepts ``timeout_sec = -1`` and fails later),
  ``instruction.md`` must not be empty, ``[environment] memory`` must be a size string (Harbor
  silently drops other values), and ``difficulty``/``category``/``tags`` in ``[metadata]`` must
  be strings (a list of strings for tags).
* Tasks using what palaestra cannot run faithfully are refused at load time rather than run
  differently: Windows tasks, network allowlists, artifacts collected from compose sidecars, a
  separate verifier defined by ``tests/docker-compose.yaml``, and in multi-step tasks a step
  verified in a separate environment or changing the network.
* Validation Harbor does for features palaestra does not use is not repeated: the syntax of
  ``allowed_hosts`` entries, MCP header credentials and ``.harborignore`` rules.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
import unicodedata
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from palaestra.tasks.config import TaskConfig
from palaestra.tasks.errors import TaskError, field_label, toml_syntax_error, validation_errors
from palaestra.tasks.task import Task
from palaestra.tasks.verifier_env import step_verifier_mode, verifier_mode

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
    problems += _duplicate_steps(task_dir / "task.toml", [s.name for s in step_configs])
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
        problems += _unsupported(task_dir / "task.toml", config)
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
    problems += _links_leaving(task_dir, ("tests", "solution", "steps"))
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
# Checks
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
    unknown = _unknown_keys(raw, config)
    if unknown:
        warnings.warn(
            f"{path}: ignoring keys Harbor does not know: {', '.join(unknown)}",
            UserWarning,
            stacklevel=3,
        )
    problems.extend(_metadata_errors(path, config.metadata))
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


def _duplicate_steps(path: Path, names: list[str]) -> list[TaskError]:
    """Harbor's rule: step names differ even on a case-insensitive, normalising file system."""
    seen: dict[str, str] = {}
    problems = []
    for name in names:
        key = unicodedata.normalize("NFC", name).casefold()
        if key in seen:
            problems.append(
                TaskError(
                    path,
                    f"step name {name!r} repeats {seen[key]!r} (names are compared ignoring case)",
                    field="steps",
                    fix="give each [[steps]] entry its own name",
                )
            )
        seen.setdefault(key, name)
    return problems


def _strip_canary(text: str) -> str:
    """Harbor's ``strip_canary``: drop leading canary comment lines and the blanks after them."""
    lines = text.split("\n")
    i = 0
    while i < len(lines) and _CANARY_LINE.match(lines[i].strip()):
        i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    return "\n".join(lines[i:])


def _unsupported(path: Path, config: TaskConfig) -> list[TaskError]:
    """What palaestra refuses to run rather than run differently from Harbor."""
    problems = []
    separate_steps = [
        s.name for s in config.steps or () if step_verifier_mode(config, s) != "shared"
    ]
    if separate_steps:
        problems.append(
            TaskError(
                path,
                f"step(s) {', '.join(separate_steps)} verify in a separate environment, which "
                "palaestra does not run for multi-step tasks (the agent's sandbox stays up "
                "between steps)",
                field="steps",
                fix='verify the steps in the agent\'s sandbox (environment_mode = "shared")',
            )
        )
    for step in config.steps or ():
        for phase in ("agent", "verifier"):
            mode = getattr(step, phase).network_mode
            if mode is not None and mode != (
                config.agent.network_mode or config.environment.network_mode
            ):
                problems.append(
                    TaskError(
                        path,
                        f"step {step.name!r} changes the {phase}'s network to {mode}, but a "
                        "palaestra sandbox keeps one network for the whole episode",
                        field="steps",
                        fix="set network_mode once, in [environment]",
                    )
                )
    if config.environment.os == "windows":
        problems.append(
            TaskError(
                path,
                "Windows tasks are not supported: palaestra sandboxes run Linux",
                field="environment.os",
                fix='set os = "linux" and provide tests/test.sh',
            )
        )
    for section in ("environment", "agent", "verifier"):
        if getattr(config, section).network_mode == "allowlist":
            problems.append(
                TaskError(
                    path,
                    "network allowlists are not supported: a palaestra sandbox has either no network "
                    "or the public internet",
                    field=f"{section}.network_mode",
                    fix='set network_mode = "no-network", or "public" if the task needs the internet',
                )
            )
    compose = path.parent / "tests" / "docker-compose.yaml"
    if verifier_mode(config) == "separate" and compose.is_file():
        problems.append(
            TaskError(
                compose,
                "a separate verifier defined by docker-compose is not supported: palaestra "
                "runs one sandbox per phase, without compose services",
                fix="define the verifier's image with tests/Dockerfile",
            )
        )
    hooks = [*config.verifier.collect, *(h for s in config.steps or () for h in s.verifier.collect)]
    for hook in hooks:
        if hook.service != "main":
            problems.append(
                TaskError(
                    path,
                    f"collect hook {hook.command!r} runs in compose service {hook.service!r}, "
                    "but palaestra runs one sandbox per task (no compose sidecars)",
                    field="verifier.collect",
                    fix="run it in the main service (leave service out)",
                )
            )
    for entry in config.artifacts:
        if not isinstance(entry, str) and entry.service not in (None, "main"):
            problems.append(
                TaskError(
                    path,
                    f"artifact {entry.source!r} comes from compose service {entry.service!r}, "
                    "but palaestra runs one sandbox per task (no compose sidecars)",
                    field="artifacts",
                    fix="collect it from the main service (leave service out)",
                )
            )
    return problems


def _metadata_errors(path: Path, metadata: dict[str, Any]) -> list[TaskError]:
    problems = []
    examples = (
        ("difficulty", '"medium"'),
        ("category", '"debugging"'),
        ("primary_reward", '"correctness"'),
    )
    for key, example in examples:
        value = metadata.get(key)
        if value is not None and not isinstance(value, str):
            problems.append(
                TaskError(
                    path,
                    f"must be a string, got {value!r}",
                    field=f"metadata.{key}",
                    fix=f"write {key} = {example}",
                )
            )
    tags = metadata.get("tags")
    if tags is not None and not (
        isinstance(tags, list) and all(isinstance(tag, str) for tag in tags)
    ):
        problems.append(
            TaskError(
                path,
                f"must be a list of strings, got {tags!r}",
                field="metadata.tags",
                fix='write tags = ["python", "sql"]',
            )
        )
    return problems


def _links_leaving(task_dir: Path, names: Sequence[str]) -> list[TaskError]:
    """Harbor's input-tree rule: nothing under these directories may resolve outside the task."""
    problems: list[TaskError] = []

    def visit(path: Path, ancestors: frozenset[Path]) -> None:
        try:
            resolved = path.resolve()
        except RuntimeError:  # a symlink loop
            problems.append(TaskError(path, "is a symbolic link loop", fix="remove the link"))
            return
        if not resolved.is_relative_to(task_dir):
            problems.append(
                TaskError(
                    path,
                    f"links outside the task directory (to {resolved})",
                    fix="replace the link with a copy of what it points to",
                )
            )
        elif path.is_dir() and resolved not in ancestors:
            for child in sorted(path.iterdir()):
                visit(child, ancestors | {resolved})

    for name in names:
        if (task_dir / name).exists() or (task_dir / name).is_symlink():
            visit(task_dir / name, frozenset())
    return problems


def _unknown_keys(raw: dict[str, Any], model: BaseModel, prefix: str = "") -> list[str]:
    """The keys of ``raw`` (one TOML table) that ``model`` has no field for, recursively."""
    known = set(type(model).model_fields)
    if isinstance(model, TaskConfig):
        known.add("version")  # the legacy spelling of schema_version
    unknown = []
    for key, value in raw.items():
        name = f"{prefix}{key}"
        if key not in known:
            unknown.append(field_label(name))
            continue
        attribute = getattr(model, key, None)
        if isinstance(attribute, BaseModel) and isinstance(value, dict):
            unknown += _unknown_keys(value, attribute, f"{name}.")
        elif isinstance(attribute, list) and isinstance(value, list):
            for i, (item, item_raw) in enumerate(zip(attribute, value, strict=False)):
                if isinstance(item, BaseModel) and isinstance(item_raw, dict):
                    unknown += _unknown_keys(item_raw, item, f"{name}[{i}].")
    return unknown
