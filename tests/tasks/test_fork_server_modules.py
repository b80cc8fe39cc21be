"""The fork server keeps the standard library modules its Python children imported, for the
next ones (``palaestra_zygote``): a child still starts with a new interpreter's modules, gets
its own module where one of the agent's would shadow a kept one, never has the server import a
name outside its list whatever a child reports, and draws its own random numbers. And test.sh
ends a checker that runs past its time with an alarm, reward 0."""

from __future__ import annotations

import asyncio
import json

import pytest

from palaestra.sandbox import SandboxSpec
from palaestra.sandbox.local import LocalBackend
from palaestra.tasks.generators.base import CHECK_RUNTIME, python_test_sh
from tests.tasks.runtime_support import run_with_runtime

#: Runs in the sandbox, as root, from the runtime's directory; prints one JSON object.
SCRIPT = r"""
import os
from palaestra_check import run_python
from palaestra_fork import json_dumps

for d in ("/tmp/clean", "/tmp/shadow"):
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o755)
with open("/tmp/shadow/dataclasses.py", "w") as f:
    f.write("MARK = 'the agent'\n")
os.chmod("/tmp/shadow/dataclasses.py", 0o644)

MODULES = "import sys\nemit(sorted(sys.modules))"
PROBE = '''
import sys
finder = sys.meta_path[0]
kept = getattr(finder, "modules", {})
at_start = ["dataclasses" in sys.modules, "dataclasses" in kept]
import dataclasses
loader = type(getattr(dataclasses.__spec__, "loader", None)).__name__
emit([at_start, loader, "dataclasses" in kept, getattr(dataclasses, "MARK", "stdlib"),
      dataclasses.dataclass is not None if not hasattr(dataclasses, "MARK") else None])
'''
KEPT = "import sys\nemit(sorted(getattr(sys.meta_path[0], 'modules', {})))"
out = {}
out["modules_first"] = run_python(MODULES, cwd="/tmp/clean").value
out["probe"] = [run_python(PROBE, cwd="/tmp/clean").value for _ in range(2)]
out["shadowed"] = run_python(PROBE, cwd="/tmp/shadow").value
out["modules_later"] = run_python(MODULES, cwd="/tmp/clean").value
out["random"] = [run_python("import random\nemit(random.random())", cwd="/tmp/clean").value
                 for _ in range(3)]
# a child reports what its sys.modules holds: agent code can put any name there
forged = ("import sys\nfor n in ('this', 'antigravity', 'xml.dom.minidom', '../x', 'os;id'):\n"
          "    sys.modules[n] = sys\nemit(1)")
out["forged"] = run_python(forged, cwd="/tmp/clean").value
out["kept"] = run_python(KEPT, cwd="/tmp/clean").value
print(json_dumps(out))
"""

#: A checker that never ends.
SLOW = "import time\ntime.sleep(60)\n"


@pytest.fixture(scope="module")
def results() -> dict:
    async def run() -> dict:
        backend = LocalBackend()
        try:
            spec = SandboxSpec(writable_dirs=("/tmp", "/tests", "/logs"))
            async with await backend.create(spec) as sandbox:
                found = await run_with_runtime(sandbox, SCRIPT)
                # test.sh as generated tasks ship it, its checker past its time
                for path in CHECK_RUNTIME:
                    await sandbox.upload(path, f"/tests/{path.name}")
                await sandbox.write_file("/tests/slow.py", SLOW)
                await sandbox.write_file("/tests/test.sh", python_test_sh("slow.py", timeout=1))
                ran = await sandbox.exec(["sh", "/tests/test.sh"], timeout=30)
                reward = await sandbox.exec(["cat", "/logs/verifier/reward.json"])
                found["slow"] = [ran.exit_code, ran.timed_out, ran.stdout, reward.stdout]
                return found
        finally:
            await backend.aclose()

    return asyncio.run(run())


def test_a_child_imports_a_kept_module_without_having_it_at_start(results: dict) -> None:
    first, second = results["probe"]
    assert first[0] == [False, False]  # nothing kept before a child imported it
    assert second[0] == [False, True]  # kept by the server, not in the child's sys.modules
    for probe in (first, second):
        loader, still_kept, mark, usable = probe[1:]
        assert loader == "SourceFileLoader"  # its own spec back, as a fresh import gives it
        assert (still_kept, mark, usable) == (False, "stdlib", True)
    # what a child starts with is what the first child started with
    assert results["modules_later"] == results["modules_first"]
    assert "dataclasses" not in results["modules_first"]


def test_a_module_of_the_agent_shadows_a_kept_one_as_in_a_new_interpreter(
    results: dict,
) -> None:
    at_start, _, _, mark, _ = results["shadowed"]
    assert at_start == [False, True]
    assert mark == "the agent"


def test_children_draw_different_random_numbers(results: dict) -> None:
    values = results["random"]
    assert len(set(values)) == 3, values  # the 2nd and 3rd share the server's kept random


def test_the_server_imports_only_names_of_its_list(results: dict) -> None:
    assert results["forged"] == 1
    kept = results["kept"]
    assert "xml.dom.minidom" in kept  # a standard module of the list: imported, kept
    assert not {"this", "antigravity", "../x", "os;id"} & set(kept)


def test_test_sh_ends_a_checker_past_its_time_with_reward_0(results: dict) -> None:
    exit_code, timed_out, stdout, reward = results["slow"]
    assert not timed_out and exit_code == 0, results["slow"]
    assert "the checker ran out of its 1 s (SIGALRM)" in stdout
    assert json.loads(reward) == {"reward": 0.0, "partial": 0.0}
