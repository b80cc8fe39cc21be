"""Attack wrong solutions for every family where their class applies (issue 29, item 6).

A family's attack surface is read from its declarative hidden test (``harness.bin``, see
``harness_spec``), never declared by hand, and :func:`armed` adds one wrong solution a class
that applies (the family's own wrong solutions are left as they are):

* ``attack-fork-relay`` (a CPU bar: a run's or a case's ``cpu``): the reference, whose runs
  each spend more CPU than their bar in a relay of forks before answering right.
* ``attack-rewrite-later-inputs`` (agent code runs more than once, or a reference runs in the
  checker): a wrong answer (the workspace as given in an optimization family, whose only fault
  is its speed; else the family's first wrong solution) whose runs overwrite every file they
  can write outside their own run with their own case's same-named input, and every copy of
  the agent's package they find with their own (a reference swapped).
* ``attack-fifo-in-output`` / ``attack-link-in-output`` (a program's output folder, ``out_dir``
  or ``trees``): the reference, whose first output file is made a FIFO, or whose output files
  are made links to their right text kept elsewhere.

Each is ``solve.sh`` running the base solution (``base.sh``), then ``attack.py install``
(``palaestra_attack``), which hooks the attack into the agent's program whatever its language.
``palaestra tasks check`` then proves the jail holds: each scores below 1.
"""

from __future__ import annotations

import dataclasses
import marshal
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RUNTIME = Path(__file__).with_name("palaestra_attack.py")
RELAY = "attack-fork-relay"
TAMPER = "attack-rewrite-later-inputs"
FIFO = "attack-fifo-in-output"
LINK = "attack-link-in-output"
CLASSES = (RELAY, TAMPER, FIFO, LINK)

_SOLVE = """#!/usr/bin/env bash
# wrong: {name} ({why})
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
{base}
python3 "$here/attack.py" install {mode}{names}
"""


def _parts(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [spec, *spec.get("also", ())]


def surface(tests: Mapping[str, str | bytes]) -> dict[str, Any]:
    """What of a task's hidden test an attack may aim at: ``cpu`` (a CPU bar somewhere),
    ``runs`` (how many times agent code runs, builds aside), ``reference`` (a reference runs
    in the checker), ``outputs`` (output folders under a case's directory)."""
    blob = tests.get("harness.bin")
    if not isinstance(blob, bytes):
        return {"cpu": False, "runs": 0, "reference": False, "outputs": []}
    spec = marshal.loads(zlib.decompress(blob))
    cpu, runs, reference, outputs = False, 0, False, []
    for part in _parts(spec):
        answer, cases, limits = part["answer"], part["cases"], part["limits"]
        kind = answer["kind"]
        if kind in ("program", "python"):
            cpu = cpu or bool(limits.get("cpu")) or any(c.get("cpu") for c in cases)
            cpu = cpu or any(c.get("cpu") for c in answer.get("calls", ()))
        if kind == "program":
            runs += len(cases)
            outputs += [answer["out_dir"]] if answer.get("out_dir") else []
            outputs += [t for t in answer.get("trees", ()) if t not in outputs]
        elif kind == "python":
            runs += len(answer.get("calls", ())) or 1
        reference = reference or bool(part.get("reference"))
        reference = reference or any(c.get("by_reference") for c in cases)
    return {"cpu": cpu, "runs": runs, "reference": reference, "outputs": outputs}


def classes(tests: Mapping[str, str | bytes]) -> tuple[str, ...]:
    """The attack wrong solutions that apply to a task whose ``tests/`` are ``tests``."""
    s = surface(tests)
    found = []
    if s["cpu"]:
        found.append(RELAY)
    if s["runs"] > 1 or (s["reference"] and s["runs"]):
        found.append(TAMPER)
    if s["outputs"]:
        found += [FIFO, LINK]
    return tuple(found)


def _attack(
    name: str, base: Mapping[str, str | bytes] | None, mode: str, names: list[str], why: str
) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {"attack.py": RUNTIME.read_text()}
    line = ""
    if base is not None:
        files.update({n: t for n, t in base.items() if n != "solve.sh"})
        files["base.sh"] = base["solve.sh"]
        line = 'bash "$here/base.sh"'
    quoted = "".join(" '" + n.replace("'", "'\\''") + "'" for n in names)
    files["solve.sh"] = _SOLVE.format(name=name, why=why, base=line, mode=mode, names=quoted)
    return files


def armed(task: Any, category: str) -> Any:
    """``task`` (a ``GeneratedTask``) with the attack wrong solutions that apply to it."""
    found = classes(task.tests)
    if not found:
        return task
    wrong = dict(task.wrong_solutions)
    outputs = surface(task.tests)["outputs"]
    if RELAY in found:
        why = "the reference, over its CPU bar in a relay of forks"
        wrong[RELAY] = _attack(RELAY, task.solution, "relay", [], why)
    if TAMPER in found:
        first = task.wrong_solutions[sorted(task.wrong_solutions)[0]]
        base = None if category == "optimization" else first
        why = "a wrong answer that rewrites later inputs and swaps in its own package"
        wrong[TAMPER] = _attack(TAMPER, base, "tamper", [], why)
    if FIFO in found:
        why = "the reference, its first output file made a FIFO"
        wrong[FIFO] = _attack(FIFO, task.solution, "fifo", outputs, why)
        why = "the reference, its output files made links to their right text"
        wrong[LINK] = _attack(LINK, task.solution, "link", outputs, why)
    return dataclasses.replace(task, wrong_solutions=wrong)
