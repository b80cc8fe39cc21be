"""Issue 29, item 6: every generated family carries the attack wrong solutions whose class
applies to it, read from its hidden test (``generators/_armed.py``), beside its own wrong
solutions, which are unchanged. That each attack scores below 1 is ``palaestra tasks check``'s
to prove (docs/tasks.md); here, which apply where, and how each is put into a program.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from palaestra.tasks.generators import _armed, families, get_family, palaestra_attack

RELAY, TAMPER, FIFO, LINK = _armed.CLASSES
OUTPUT = (FIFO, LINK)

#: family -> the attack classes of its medium task (seed 0): a CPU bar (RELAY), agent code run
#: more than once or a reference run in the checker (TAMPER), a program's output folders
#: (FIFO, LINK). A family whose agent code runs once without a bar, or that runs none (SQL
#: read-only, a shell task's state), has none.
EXPECTED: dict[str, tuple[str, ...]] = {
    "build-order": (RELAY, TAMPER),
    "edit-distance": (RELAY, TAMPER),
    "glob-match": (RELAY, TAMPER),
    "meeting-rooms": (RELAY, TAMPER),
    "range-queries-c": (TAMPER,),
    "spreadsheet-eval": (RELAY, TAMPER),
    "access-log-report": (RELAY, TAMPER),
    "event-windows-sql": (),
    "issue-search-api": (),
    "region-revenue-pg": (),
    "revenue-join-csv": (RELAY, TAMPER),
    "stock-ledger": (RELAY, TAMPER),
    "ticket-report-sql": (),
    "config-parser": (),
    "invoice-package": (),
    "log-query-cli": (TAMPER,),
    "orders-pipeline": (TAMPER, *OUTPUT),
    "sales-report-js": (TAMPER,),
    "ttl-cache-state": (),
    "bulk-rename": (RELAY, TAMPER, *OUTPUT),
    "disk-usage-report": (RELAY, TAMPER),
    "log-rotate-js": (TAMPER, *OUTPUT),
    "mirror-sync": (RELAY, TAMPER, *OUTPUT),
    "safe-extract": (RELAY, TAMPER, *OUTPUT),
    "shell-lookup": (),
    "shell-warmup": (),
    "sort-inbox": (RELAY, TAMPER, *OUTPUT),
    "build-graph-memo": (RELAY, TAMPER),
    "key-totals-rust": (RELAY, TAMPER),
    "log-split-io": (RELAY, TAMPER, *OUTPUT),
    "report-string-building": (RELAY, TAMPER),
    "shipment-reconcile": (RELAY, TAMPER),
    "unindexed-sqlite": (RELAY, TAMPER),
    "api-pagination": (RELAY,),
    "cli-subcommand": (RELAY, TAMPER),
    "client-resilience": (RELAY,),
    "kv-store-go": (TAMPER,),
    "model-validation": (RELAY,),
    "report-exporters": (RELAY, TAMPER),
}
#: Tiers whose surface differs from the medium one's.
OTHER_TIERS = {
    ("range-queries-c", 0.9): (RELAY, TAMPER),
    ("client-resilience", 0.9): (RELAY, TAMPER),
}


def test_the_table_names_every_family() -> None:
    assert sorted(EXPECTED) == sorted(f.name for f in families())


CASES = [(name, 0.5, want) for name, want in EXPECTED.items()]
CASES += [(name, d, want) for (name, d), want in OTHER_TIERS.items()]


@pytest.mark.parametrize(("name", "difficulty", "want"), CASES)
def test_each_family_carries_the_attacks_that_apply(
    name: str, difficulty: float, want: tuple[str, ...]
) -> None:
    fam = get_family(name)
    own = fam.generate_fn(fam.spec(0, difficulty))
    task = fam.generate(0, difficulty)
    assert _armed.classes(task.tests) == want
    assert sorted(n for n in task.wrong_solutions if n.startswith("attack-")) == sorted(want)
    for n, files in own.wrong_solutions.items():  # the family's own: byte-identical
        assert task.wrong_solutions[n] == files
    for n in want:
        files = task.wrong_solutions[n]
        assert files["attack.py"] == _armed.RUNTIME.read_text()
        solve = files["solve.sh"]
        assert isinstance(solve, str) and 'attack.py" install' in solve
        if n != TAMPER or fam.category != "optimization":
            assert 'bash "$here/base.sh"' in solve and "base.sh" in files


def _hook(name: str, text: str, mode: str, names: list[str] = ()) -> str:
    out = palaestra_attack._hooked(
        f"/app/{name}",
        text,
        mode,
        list(names),
        " ".join([mode, *names]),
        mode in ("relay", "tamper"),
    )
    assert out is not None and out != text
    return out


def test_a_python_hook_keeps_the_module_valid_and_runs_first_or_at_exit() -> None:
    text = '"""doc"""\nfrom __future__ import (\n    annotations,\n)\nimport sys\nprint(1)\n'
    start = _hook("m.py", text, "relay")
    ast.parse(start)  # a __future__ import stays first
    assert start.index("from __future__") < start.index("_pa_run()") < start.index("print(1)")
    end = _hook("m.py", text, "fifo", ["OUT"])
    assert "atexit" in end and "'fifo', 'OUT'" in end
    ast.parse(end)


def test_hooks_in_other_languages() -> None:
    js = _hook("main.js", '"use strict";\nconst a = 1;\n', "link", ["var log"])
    assert js.startswith('"use strict";\n') and "process.on('exit', pa)" in js
    c = _hook("main.c", "int main(void) { return 0; }\n", "relay")
    assert "__attribute__((constructor))" in c and "palaestra_attack();" in c
    rs = _hook("main.rs", "fn main() {}\n", "tamper")
    assert '#[link_section = ".init_array"]' in rs
    sh = _hook("run.sh", "#!/bin/sh\necho hi\n", "tamper")
    assert sh.splitlines()[:2] == [
        "#!/bin/sh",
        f"python3 {palaestra_attack.HOME} tamper >/dev/null 2>&1 || true",
    ]


def test_the_link_attack_keeps_the_right_text_outside_the_outputs(tmp_path: Path) -> None:
    """Run as the hook runs it (a Python program's argv after ``--``): every output file is
    a link to its right text, which a checker following links would read."""
    out = tmp_path / "case" / "OUT"
    out.mkdir(parents=True)
    (out / "a.log").write_text("right\n")
    argv = ["link", "OUT", "/app/x.py", "--", "/app/x.py", f"{tmp_path}/case/in.log", str(out)]
    runtime = Path(palaestra_attack.__file__)
    subprocess.run([sys.executable, str(runtime), *argv], check=True, cwd=tmp_path)
    assert os.path.islink(out / "a.log") and (out / "a.log").read_text() == "right\n"
