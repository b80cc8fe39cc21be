"""One kept bug as a Harbor task directory.

::

    task.toml               docker_image = the project's image, no network, sealed system,
                            metadata: source, mutators, failing tests, lines, files, difficulty
    instruction.md          the symptom (:mod:`.instruction`)
    environment/            the project with the bug: copied into /app (files the bug did not
                            touch are hard links to the unpacked sdist: a task costs its
                            changed files and its metadata on disk)
    tests/test.sh           copies /app with the project's test files restored to a directory
    tests/suite/...         of nobody's, runs FAIL_TO_PASS and the PASS_TO_PASS sample there
                            with pytest as nobody, reward 1 only if all pass (:func:`test_sh`)
    tests/tests.json, selected.txt, palaestra_synth_pytest.py, palaestra_synth_verdict.py
    solution/solve.sh       applies fix.patch, the injected change reversed
    wrong_solutions/partial-fix/   (two-site bugs) reverses one site only: must score 0

Nothing of the original source is in ``environment/`` or ``tests/``: the solution is uploaded
only for the oracle, and ``/tests`` only after the agent is done.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

from palaestra.tasks.synth.edits import changed_lines, unified_diff
from palaestra.tasks.synth.environment import VENV
from palaestra.tasks.synth.mutators import Site, mutate
from palaestra.tasks.synth.project import Project
from palaestra.tasks.synth.testrun import PLUGIN, PYTEST_OPTIONS

HERE = Path(__file__).parent
#: Raised when what a task directory holds changes (2: the verifier runs pytest as nobody; 3:
#: with PYTHONHASHSEED=0, as the baseline ran it, so that test ids made from a set match):
#: tasks cached from a manifest by an older writer are written afresh, not reused.
WRITER_FORMAT = 3
VERDICT = HERE / "palaestra_synth_verdict.py"
PATCHER = HERE / "palaestra_synth_patch.py"
_SKIP_DIRS = {"__pycache__", ".git", ".hg", ".svn", ".tox", ".nox", ".mypy_cache"}


def _link(source: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, dest)
    except OSError:
        shutil.copy2(source, dest)


def _copy_tree(root: Path, dest: Path, replaced: dict[str, str]) -> None:
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = Path(directory) / name
            rel = path.relative_to(root).as_posix()
            target = dest / rel
            if rel in replaced:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(replaced[rel], encoding="utf-8")
            elif path.is_symlink() or not path.is_file():
                continue
            else:
                _link(path, target)


def mutated_files(project: Project, sites: list[Site]) -> dict[str, tuple[str, str]]:
    """``path -> (original, mutated)`` of the files the sites change."""
    changed: dict[str, tuple[str, str]] = {}
    for path in sorted({s.path for s in sites}):
        original = (project.root / path).read_text(encoding="utf-8")
        after = mutate(original, [s for s in sites if s.path == path])
        if after is None:
            raise ValueError(f"sites {[s.key for s in sites]} no longer change {path}")
        changed[path] = (original, after)
    return changed


def difficulty(fail_to_pass: int, sites: int, lines: int) -> str:
    """Two sites, or one failing test and more than two changed lines: hard; five or more
    failing tests (a loud bug) with one site: easy; else medium."""
    if sites > 1 or (fail_to_pass == 1 and lines > 2):
        return "hard"
    return "easy" if fail_to_pass >= 5 else "medium"


def _task_toml(project: Project, image: str, sites: list[Site], f2p: int, lines: int) -> str:
    mutators = ", ".join(f'"{m}"' for m in sorted({s.mutator for s in sites}))
    files = len({s.path for s in sites})
    source = f"pypi:{project.name}=={project.version}" if project.sdist else project.name
    return textwrap.dedent(
        f"""\
        version = "1.0"

        [metadata]
        author_name = "palaestra tasks synth"
        category = "debugging"
        difficulty = "{difficulty(f2p, len(sites), lines)}"
        tags = ["swe-synth", "{project.short}", "python", {mutators}]
        source = "{source}"
        sealed_system = true
        fail_to_pass = {f2p}
        lines_changed = {lines}
        files_changed = {files}
        sites = {len(sites)}
        mutators = [{mutators}]

        [verifier]
        timeout_sec = 900.0

        [agent]
        timeout_sec = 1800.0

        [environment]
        docker_image = "{image}"
        workdir = "/app"
        network_mode = "no-network"
        cpus = 1
        memory_mb = 4096
        storage_mb = 10240
        """
    )


def test_sh(files: list[str], import_root: str = "") -> str:
    """The hidden verifier. Root copies the workspace, with the test files restored, into a
    fresh directory of nobody's; pytest runs there as nobody (the agent's code it imports
    cannot reach ``/tests``, ``/logs`` or root's processes); then root kills every process of
    nobody and scores the report (``palaestra_synth_verdict.py``, isolated from the workspace).
    """
    options = " ".join(PYTEST_OPTIONS)
    targets = " ".join(f"'{f}'" for f in files)
    pythonpath = f"$work/app/{import_root}" if import_root else "$work/app"
    return textwrap.dedent(
        f"""\
        #!/bin/sh
        # Hidden verifier of a synthesised bug-fix task (palaestra tasks synth). The workspace
        # is copied, the project's own test files restored over it, into a directory of
        # nobody's; pytest runs there as nobody, offline, the tests the bug broke (fail_to_pass)
        # and a sample of those it left passing (pass_to_pass); then every process of nobody is
        # killed and reward 1 given only when every one of them passed.
        mkdir -p /logs/verifier
        rm -f /logs/verifier/reward.json
        verdict="{VENV}/bin/python -I -S -B /tests/palaestra_synth_verdict.py"
        run=$(mktemp -d /tmp/palaestra-synth.XXXXXX) || exit 1
        work="$run/work"
        chmod 755 "$run"
        cp /tests/palaestra_synth_pytest.py /tests/selected.txt "$run/"
        chmod 644 "$run/palaestra_synth_pytest.py" "$run/selected.txt"
        $verdict prepare /app /tests/suite "$work" || echo "could not copy the workspace"
        cd "$work/app" || cd /
        PYTHONPATH="$run:{pythonpath}" PALAESTRA_SYNTH_SELECT="$run/selected.txt" \\
          PALAESTRA_SYNTH_REPORT="$work/report.json" HOME="$work/home" TMPDIR="$work/tmp" \\
          PYTHONDONTWRITEBYTECODE=1 PYTHONHASHSEED=0 timeout -s KILL 800 \\
          setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs \\
          {VENV}/bin/python -B -m pytest {options} {targets} > /logs/verifier/pytest.log 2>&1
        cd /
        tail -n 15 /logs/verifier/pytest.log
        $verdict score "$work/report.json" /tests/tests.json
        exit 0
        """
    )


def solve_sh(note: str) -> str:
    return (
        "#!/usr/bin/env bash\n"
        f"# {note}\n"
        "set -euo pipefail\n"
        "python3 /solution/palaestra_synth_patch.py /solution/fix.patch /app\n"
    )


def _solution(dest: Path, patch: str, note: str) -> None:
    dest.mkdir(parents=True)
    (dest / "fix.patch").write_text(patch)
    shutil.copy(PATCHER, dest / PATCHER.name)
    (dest / "solve.sh").write_text(solve_sh(note))
    (dest / "solve.sh").chmod(0o755)


def write_task(
    project: Project,
    image: str,
    sites: list[Site],
    fail_to_pass: list[str],
    pass_to_pass: list[str],
    instruction: str,
    dest: Path,
) -> Path:
    """Write the task at ``dest`` (which must not exist)."""
    changed = mutated_files(project, sites)
    lines = sum(changed_lines(before, after) for before, after in changed.values())
    dest.mkdir(parents=True)
    toml = _task_toml(project, image, sites, len(fail_to_pass), lines)
    (dest / "task.toml").write_text(toml)
    (dest / "instruction.md").write_text(instruction)
    _copy_tree(project.root, dest / "environment", {p: a for p, (_, a) in changed.items()})
    tests = dest / "tests"
    for rel in project.tests:
        _link(project.root / rel, tests / "suite" / rel)
    checked = fail_to_pass + pass_to_pass
    files = sorted({t.split("::")[0] for t in checked})
    (tests / "test.sh").write_text(test_sh(files, project.import_root))
    (tests / "test.sh").chmod(0o755)
    (tests / "selected.txt").write_text("".join(f"{t}\n" for t in checked))
    data = {"fail_to_pass": fail_to_pass, "pass_to_pass": pass_to_pass}
    (tests / "tests.json").write_text(json.dumps(data, indent=1) + "\n")
    shutil.copy(PLUGIN, tests / PLUGIN.name)
    shutil.copy(VERDICT, tests / VERDICT.name)
    reverse = "".join(unified_diff(p, a, b) for p, (b, a) in changed.items())
    _solution(dest / "solution", reverse, "reference fix: the injected change, reversed")
    if len(sites) == 2:
        first = sites[0]
        before = (project.root / first.path).read_text(encoding="utf-8")
        alone = mutated_files(project, [sites[1]])
        current = changed[first.path][1]
        restored = alone[first.path][1] if first.path in alone else before
        partial = unified_diff(first.path, current, restored)
        _solution(
            dest / "wrong_solutions" / "partial-fix",
            partial,
            f"wrong: restores only the first of the two changed sites ({first.mutator})",
        )
    return dest
