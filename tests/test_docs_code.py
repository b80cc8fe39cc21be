"""The docs name code that exists: every source path and every ``palaestra.x.y`` name in the
README and docs/ resolves, every module the architecture page's layout names is there, and the
host processes ``tasks/`` starts are the ones docs/architecture.md lists. Read statically: no
module is imported, so an optional dependency's absence hides nothing."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TREES = ("src", "tests", "benchmarks", "examples", "scripts")
#: Paths of other projects' sources, which the docs cite.
FOREIGN = ("harbor/", "vllm/", "skyrl-train/")
DOTTED = re.compile(r"(?<![\w./-])palaestra(?:\.[A-Za-z_]\w*)+")
SOURCE_PATH = re.compile(r"`([\w./-]+\.py)`")


def _files() -> list[str]:
    return [
        p.relative_to(ROOT).as_posix()
        for tree in TREES
        for p in (ROOT / tree).rglob("*.py")
        if "__pycache__" not in p.parts
    ]


def missing_paths(text: str, files: list[str]) -> list[str]:
    """The backticked ``.py`` paths in ``text`` that name no file: a path from the repository
    root or from ``src/`` is exact; a shorter one (``local/process.py``) must end a file's path.
    In-sandbox paths (``/app/...``), bare names and other projects' paths are not checked."""
    problems = []
    for path in SOURCE_PATH.findall(text):
        if path.startswith(("/", *FOREIGN)) or "/" not in path:
            continue
        if path.startswith(TREES) or path.startswith("palaestra/"):
            exact = path if path.startswith(TREES) else f"src/{path}"
            if exact not in files:
                problems.append(path)
        elif not any(f.endswith(f"/{path}") for f in files):
            problems.append(path)
    return problems


def _module(parts: list[str]) -> Path | None:
    base = SRC.joinpath(*parts)
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _defines(source: str, name: str) -> bool:
    """Whether a module's source defines or imports ``name`` (or lists it in ``__all__``)."""
    return bool(
        re.search(
            rf"^\s*(?:async\s+def|def|class)\s+{name}\b|^\s*{name}\s*[:=]"
            rf"|^\s*(?:from\s+\S+\s+)?import\b[^\n]*\b{name}\b|^\s+{name},?\s*(?:#.*)?$"
            rf"|[\"']{name}[\"']",
            source,
            re.M,
        )
    )


def unresolved_names(text: str, labels: str) -> list[str]:
    """The ``palaestra.x.y`` names in ``text`` that are neither a module nor a name its
    longest module prefix defines; a name of the package root alone may be a label the code
    writes (``palaestra.run_id``), found as a string in ``labels``."""
    problems = []
    for dotted in sorted(set(DOTTED.findall(text))):
        parts = dotted.split(".")
        cut = next(i for i in range(len(parts), 0, -1) if _module(parts[:i]) or i == 1)
        if cut == len(parts):
            continue
        module = _module(parts[:cut])
        assert module is not None
        if _defines(module.read_text(), parts[cut]):
            continue
        if cut == 1 and f'"{dotted}' in labels:
            continue
        problems.append(dotted)
    return problems


def _all_source() -> str:
    return "\n".join(p.read_text() for p in (SRC / "palaestra").rglob("*.py"))


def test_every_source_path_in_the_docs_names_a_file() -> None:
    files = _files()
    problems = [f"{p.name}: {path}" for p in PAGES for path in missing_paths(p.read_text(), files)]
    assert problems == []


def test_every_palaestra_name_in_the_docs_resolves() -> None:
    labels = _all_source()
    problems = [f"{p.name}: {n}" for p in PAGES for n in unresolved_names(p.read_text(), labels)]
    assert problems == []


def test_every_module_the_architecture_layout_names_exists() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    layout = text.split("## Layout", 1)[1].split("```")[1]
    names = {p.name for p in (SRC / "palaestra").rglob("*.py")}
    dirs = {p.name for p in (SRC / "palaestra").rglob("*") if p.is_dir()}
    named = set(re.findall(r"(?<![\w/.-])([A-Za-z_]\w*\.py)\b", layout)) - {"test_architecture.py"}
    assert sorted(named - names) == []
    named_dirs = set(re.findall(r"(?<![\w/.-])([A-Za-z_]\w*)/(?=[\s(,])", layout))
    assert sorted(named_dirs - dirs - {"src", "tests", "benchmarks", "examples", "docs"}) == []


def test_the_checkers_catch_a_missing_path_and_an_unknown_name() -> None:
    files = ["src/palaestra/env/code_env.py", "src/palaestra/sandbox/local/process.py"]
    text = (
        "`src/palaestra/env/code_env.py` `local/process.py` `/app/x.py` `harbor/trial/a.py` "
        "`src/palaestra/env/gone.py` `local/gone.py` `palaestra/env/code_env.py`"
    )
    assert missing_paths(text, files) == ["src/palaestra/env/gone.py", "local/gone.py"]
    names = "palaestra.env.code_env.CodeEnv palaestra.rl.NoSuchThing palaestra.nowhere.x"
    assert unresolved_names(names, labels="") == ["palaestra.nowhere.x", "palaestra.rl.NoSuchThing"]
    assert unresolved_names("palaestra.run_id", labels='"palaestra.run_id": run') == []


# --- what tasks/ runs on the host ------------------------------------------------------------

_STARTS = {
    ("subprocess", "run"),
    ("subprocess", "Popen"),
    ("subprocess", "call"),
    ("subprocess", "check_call"),
    ("subprocess", "check_output"),
    ("asyncio", "create_subprocess_exec"),
    ("asyncio", "create_subprocess_shell"),
    ("os", "system"),
    ("os", "popen"),
    ("os", "fork"),
    ("os", "posix_spawn"),
    ("os", "posix_spawnp"),
    ("pty", "spawn"),
}


def starts_processes(source: str) -> bool:
    """Whether the module calls something that starts a process (``subprocess.run``,
    ``os.fork``, ``os.exec*``, ...); strings and comments do not count."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner, attr = node.func.value, node.func.attr
        if isinstance(owner, ast.Name) and (
            (owner.id, attr) in _STARTS or (owner.id == "os" and attr.startswith("exec"))
        ):
            return True
    return False


def test_tasks_starts_host_processes_only_where_the_architecture_page_says() -> None:
    """``tasks/`` makes tasks; the modules that start host processes for it are the ones
    docs/architecture.md names. The runtimes shipped into a task's ``tests/`` (``palaestra_*``,
    ``humaneval_cure``) run inside the sandbox; the packs' files are task content."""
    tasks = SRC / "palaestra" / "tasks"
    found = {
        p.relative_to(SRC / "palaestra").as_posix()
        for p in tasks.rglob("*.py")
        if "packs" not in p.relative_to(tasks).parts
        and not p.name.startswith("palaestra_")
        and p.name != "humaneval_cure.py"
        and starts_processes(p.read_text())
    }
    page = (ROOT / "docs" / "architecture.md").read_text()
    boundary = page.split("3. **Task boundary**", 1)[1].split("The runtimes it ships", 1)[0]
    named = set(re.findall(r"`(tasks/[\w/]+\.py)`", boundary))
    assert found == named


def test_the_process_check_sees_calls_not_strings() -> None:
    assert starts_processes("import subprocess\nsubprocess.run(['ls'])\n")
    assert starts_processes("import os\nos.execvp('ls', ['ls'])\n")
    assert not starts_processes("'''subprocess.run, os.fork'''\nX = r'os\\.fork'\n")
