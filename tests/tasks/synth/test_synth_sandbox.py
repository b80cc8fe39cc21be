"""Synthesised tasks in real sandboxes: on the local backend (the project's image as a root
filesystem) the reference passes, doing nothing fails and a partial fix of a two-site bug
fails; an episode on Docker likewise; an agent searching the sandbox for the original
source (history, bytecode, pip, site-packages, every readable file) finds nothing; and agent
code that the verifier's pytest imports cannot set the reward."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest

from palaestra.env.code_env import CodeEnv
from palaestra.env.sandbox_spec import prepare_sandbox_spec
from palaestra.run.check import check_tasks
from palaestra.run.rollout import rollout
from palaestra.run.synth_vet import unportable, vet
from palaestra.sandbox import make_backend
from palaestra.scaffolds import NopPolicy, OraclePolicy
from palaestra.tasks import load_task
from palaestra.tasks.synth.manifest import Manifest
from palaestra.tasks.synth.pipeline import Options, synthesise
from tests.sandbox.docker_support import requires_docker
from tests.tasks.synth.project_fixture import CORE, make_project

pytestmark = requires_docker

SEARCH = r"""
import base64, importlib.metadata as md, os, subprocess, sys
needle = base64.b64decode(sys.argv[1])
found = []
for top, dirs, files in os.walk("/"):
    if top == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
    for d in dirs:
        if d in (".git", ".hg", ".svn"):
            found.append("history: " + os.path.join(top, d))
    for name in files:
        path = os.path.join(top, name)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        if needle in data:
            found.append("original line in " + path)
        if name.endswith((".pyc", ".whl", ".tar.gz")) and b"tinycalc" in data:
            found.append("package copy " + path)
try:  # the project's own metadata in the workspace (an sdist's *.egg-info) holds no code
    where = str(md.distribution("tinycalc").locate_file(""))
    if not where.startswith("/app"):
        found.append("installed distribution at " + where)
except md.PackageNotFoundError:
    pass
for cmd in ([sys.executable, "-m", "pip", "show", "tinycalc"], ["pip", "download", "tinycalc"],
            ["git", "-C", "/app", "log"], ["git", "-C", "/app", "reflog"]):
    try:
        if subprocess.run(cmd, capture_output=True, timeout=60).returncode == 0:
            found.append("command works: " + " ".join(cmd))
    except OSError:
        pass
if os.listdir("/tests"):
    found.append("/tests holds " + ", ".join(os.listdir("/tests")))
import tinycalc.core
if tinycalc.core.__file__ != "/app/tinycalc/core.py":
    found.append("imports another copy: " + tinycalc.core.__file__)
print("FOUND" if found else "NOTHING", found)
"""


@pytest.fixture(scope="module")
def synthesised(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest]:
    root = make_project(tmp_path_factory.mktemp("src") / "tinycalc")
    out = tmp_path_factory.mktemp("out")
    for path in (out, *out.parents):  # local sandboxes' unprivileged uid reaches the tasks
        path.chmod(path.stat().st_mode | 0o011)
    options = Options(candidates=24, pairs=0.5, image=True, vet=vet)
    return out, synthesise(str(root), out, options, say=lambda _: None)


def _pick(manifest: Manifest, sites: int) -> str:
    return next(b.id for b in manifest.tasks if len(b.sites) == sites)


async def test_reference_passes_nop_and_partial_fix_fail_on_local(synthesised) -> None:
    out, manifest = synthesised
    chosen = [_pick(manifest, 1), _pick(manifest, 2)]
    tasks = [load_task(out / tid) for tid in chosen]
    results = await check_tasks(tasks, concurrency=2)
    got = {(r.task_id, r.scenario): r.reward for r in results}
    assert got == {
        (chosen[0], "oracle"): 1.0,
        (chosen[0], "nop"): 0.0,
        (chosen[1], "oracle"): 1.0,
        (chosen[1], "nop"): 0.0,
        (chosen[1], "wrong:partial-fix"): 0.0,
    }, [(r.task_id, r.scenario, r.reward, r.detail[-500:]) for r in results]


async def test_an_episode_on_docker_scores_oracle_1_and_nop_0(synthesised) -> None:
    out, manifest = synthesised
    task = load_task(out / _pick(manifest, 1))
    for policy, reward in ((OraclePolicy.from_tasks([task]), 1.0), (NopPolicy(), 0.0)):
        async with CodeEnv([task], sandbox="docker") as env:
            end = (await rollout(env, policy)).end
        assert end.reward == reward, (end.error_class, end.error_message)


def _unique_original_line(out: Path, manifest: Manifest) -> tuple[str, str]:
    """A one-site task and an original line its bug changed that occurs once in the project."""
    for bug in manifest.tasks:
        if len(bug.sites) != 1:
            continue
        mutated = (out / bug.id / "environment" / "tinycalc" / "core.py").read_text()
        for line in CORE.splitlines():
            text = line.strip()
            if len(text) > 10 and line not in mutated.splitlines() and CORE.count(text) == 1:
                return bug.id, text
    raise AssertionError("no task changes a line that is unique in the project")


@pytest.mark.parametrize("backend_name", ["local", "docker"])
async def test_the_original_source_cannot_be_recovered(synthesised, backend_name) -> None:
    out, manifest = synthesised
    task_id, original = _unique_original_line(out, manifest)
    task = load_task(out / task_id)
    spec = await prepare_sandbox_spec(task, backend_name)
    backend = make_backend(backend_name)
    try:
        async with await backend.create(spec) as sandbox:
            needle = base64.b64encode(original.encode()).decode()
            result = await sandbox.exec(["python", "-c", SEARCH, needle], timeout=600)
    finally:
        await backend.aclose()
    assert result.exit_code == 0, result.stderr[-2000:]
    assert result.stdout.startswith("NOTHING"), result.stdout[-2000:]
    checked = json.loads((out / task_id / "tests" / "tests.json").read_text())
    assert checked["fail_to_pass"]


#: Agent code run at import by the verifier's pytest, each aiming at a reward of 1 without a
#: fix. When pytest ran as root over /app, all but write-reward (overwritten by the verdict)
#: scored 1.
HOSTILE = {
    "rewrite-verdict": """
try:
    with open("/tests/palaestra_synth_verdict.py", "w") as f:
        f.write("import json\\njson.dump({'reward': 1.0}, open('/logs/verifier/reward.json', 'w'))\\n")
    _tried.append("wrote the verdict")
except OSError as e:
    _tried.append(repr(e))
""",
    "write-reward": """
import os
try:
    os.makedirs("/logs/verifier", exist_ok=True)
    with open("/logs/verifier/reward.json", "w") as f:
        f.write('{"reward": 1.0}')
    os.chmod("/logs/verifier/reward.json", 0o444)
    _tried.append("wrote the reward")
except OSError as e:
    _tried.append(repr(e))
""",
    "late-writer": """
import os, time
if os.fork() == 0:
    try:
        os.setsid()
        for _ in range(30000):  # waits for the verdict's reward, then overwrites it
            time.sleep(0.002)
            try:
                with open("/logs/verifier/reward.json", "r+") as f:
                    if '"reward": 1.0' not in f.read():
                        f.seek(0)
                        f.write('{"reward": 1.0}')
                        f.truncate()
            except OSError:
                pass
    finally:
        os._exit(0)
_tried.append("left a writer")
""",
    "symlinked-report": """
import atexit, json, os
def _forge():
    report = os.environ["PALAESTRA_SYNTH_REPORT"]
    with open(os.environ["PALAESTRA_SYNTH_SELECT"]) as f:
        ids = [line.strip() for line in f if line.strip()]
    fake = os.path.join(os.environ.get("TMPDIR", "/tmp"), "forged.json")
    with open(fake, "w") as f:
        json.dump({"outcomes": {i: "passed" for i in ids}}, f)
    if os.path.lexists(report):
        os.unlink(report)
    os.symlink(fake, report)
    _tried.append("linked the report")
atexit.register(_forge)
""",
}
#: Each says at exit, after pytest's summary (in the verifier's output), what it tried.
_SAY = """
import atexit as _atexit
_tried = []
_atexit.register(lambda: print("HOSTILE CODE RAN:", _tried, flush=True))
"""
#: A module shadowing the standard library's json: whoever imports json with the workspace on
#: its path (the verdict, run as root, had /app on PYTHONPATH) writes a reward of 1 and exits.
SHADOW_JSON = """
import os
try:
    os.makedirs("/logs/verifier", exist_ok=True)
    with open("/logs/verifier/reward.json", "w") as f:
        f.write('{"reward": 1.0}')
except OSError:
    pass
os._exit(0)
"""


def _hostile_solutions(task_dir: Path) -> list[str]:
    names = []
    for name, code in {**HOSTILE, "shadow-json": ""}.items():
        where = task_dir / "wrong_solutions" / name
        where.mkdir(parents=True)
        if name == "shadow-json":
            (where / "json.py").write_text(SHADOW_JSON)
            script = "mkdir -p /app/json\ncp /solution/json.py /app/json/__init__.py\n"
        else:
            (where / "hostile.py").write_text(_SAY + code)
            script = "cat /solution/hostile.py >> /app/tinycalc/__init__.py\n"
        (where / "solve.sh").write_text("#!/bin/sh\nset -e\n" + script)
        names.append(f"wrong:{name}")
    return names


async def test_agent_code_run_by_the_verifier_cannot_set_the_reward(synthesised, tmp_path) -> None:
    out, manifest = synthesised
    source = out / _pick(manifest, 1)
    task_dir = tmp_path / source.name
    shutil.copytree(source, task_dir)
    for path in (tmp_path, *tmp_path.parents):  # local sandboxes' unprivileged uid reaches it
        path.chmod(path.stat().st_mode | 0o011)
    hostile = _hostile_solutions(task_dir)
    results = await check_tasks([load_task(task_dir)], concurrency=2)
    got = {r.scenario: r.reward for r in results}
    detail = [(r.scenario, r.reward, r.status, r.detail[-800:]) for r in results]
    assert got["oracle"] == 1.0 and got["nop"] == 0.0, detail
    assert sorted(s for s in got if s.startswith("wrong:")) == sorted(hostile), detail
    assert all(got[s] != 1.0 for s in hostile), detail
    said = {r.scenario: r.detail for r in results}
    assert all("HOSTILE CODE RAN" in said[f"wrong:{name}"] for name in HOSTILE), detail
    assert "no sound pytest report" in said["wrong:symlinked-report"], detail


def test_tasks_whose_test_ids_the_image_names_otherwise_are_dropped(synthesised) -> None:
    """The pipeline collected tinycalc's tests in its image (its ids follow a set's order:
    the same there, with PYTHONHASHSEED=0, as in the baseline) and dropped no task; a task
    naming an id the image does not collect would be dropped."""
    _, manifest = synthesised
    assert manifest.stats["dropped_in_image"] == {} and manifest.tasks
    every = {t for b in manifest.tasks for t in b.fail_to_pass + b.pass_to_pass}
    assert unportable(manifest.tasks, every) == []
    first = manifest.tasks[0]
    missing = every - {first.fail_to_pass[0]}
    assert first.id in unportable(manifest.tasks, missing)
