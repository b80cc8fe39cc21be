"""The rules a Harbor task must pass to load, beyond its schema
(:func:`palaestra.tasks.loader.load_task` applies them). Where palaestra differs from Harbor, it
is stricter and says why:

* Harbor ignores keys it does not know; so do we, but :func:`~palaestra.tasks.loader.load_task` warns about them (a typo
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

import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from palaestra.tasks.config import TaskConfig
from palaestra.tasks.errors import TaskError, field_label
from palaestra.tasks.verifier_env import step_verifier_mode, verifier_mode


def duplicate_steps(path: Path, names: list[str]) -> list[TaskError]:
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


def unsupported(path: Path, config: TaskConfig) -> list[TaskError]:
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


def metadata_errors(path: Path, metadata: dict[str, Any]) -> list[TaskError]:
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


def links_leaving(task_dir: Path, names: Sequence[str]) -> list[TaskError]:
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


def unknown_keys(raw: dict[str, Any], model: BaseModel, prefix: str = "") -> list[str]:
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
            unknown += unknown_keys(value, attribute, f"{name}.")
        elif isinstance(attribute, list) and isinstance(value, list):
            for i, (item, item_raw) in enumerate(zip(attribute, value, strict=False)):
                if isinstance(item, BaseModel) and isinstance(item_raw, dict):
                    unknown += unknown_keys(item_raw, item, f"{name}[{i}].")
    return unknown
