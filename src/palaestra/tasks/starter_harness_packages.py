"""The hidden tests of the starter tasks that call a package's functions in a child (the
debugging and software-engineering tasks), as declarative harness specs; some run its command
line too, as a further part. :mod:`palaestra.tasks.starter_harness` lists them with the others
and writes them; the cases and their expected values come from the task's ``tests/`` module,
computed here when the spec is built."""

from __future__ import annotations

from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.starter_harness_calls import PACK, pack_module, shipped_cases, without_runtime

_OVERRIDES_CALL = """\
import os, tempfile
from appconfig import ConfigError, load_config
scratch = tempfile.mkdtemp()
out = []
for n, case in enumerate(INPUT):
    path = os.path.join(scratch, f"c{n}.ini")
    with open(path, "w") as f:
        f.write(case["ini"])
    saved = dict(os.environ)
    try:
        if case["via_os_environ"]:
            os.environ.update(case["env"])
            cfg = load_config(path)
        else:
            cfg = load_config(path, environ=dict(case["env"]))
        out.append({"config": {s: {k: [type(v).__name__, v] for k, v in kv.items()}
                               for s, kv in cfg.items()}})
    except ConfigError as e:
        out.append({"error": str(e)})
    except Exception as e:
        out.append({"crash": type(e).__name__ + ": " + str(e)[:200]})
    finally:
        os.environ.clear()
        os.environ.update(saved)
    with open(path) as f:
        if f.read() != case["ini"]:
            out[-1] = {"crash": "the file was modified"}
emit(out)
"""


def env_overrides() -> dict[str, str | bytes]:
    """150 configurations and environments (hand-written, random from the test's seed) through
    load_config in one child within 60 s; each result the reference's (``tests/
    override_cases.py``). Reward 1 only when every case passes, as before."""
    return shipped_cases(
        "software-engineering-easy-env-overrides",
        "override_cases",
        code=_OVERRIDES_CALL,
        answer="/app/appconfig",
        timeout=60,
        compare=hs.compare("function", module="override_cases", fn="check"),
    )


_TEMPLATE_CALL = """\
import types
from minitpl import Template, TemplateSyntaxError


def build(v):
    if isinstance(v, dict):
        if "__ns__" in v:
            return types.SimpleNamespace(**{k: build(x) for k, x in v["__ns__"].items()})
        return {k: build(x) for k, x in v.items()}
    if isinstance(v, list):
        return [build(x) for x in v]
    return v


out = []
for source, context in INPUT:
    try:
        t = Template(source)
    except TemplateSyntaxError as e:
        lineno = getattr(e, "lineno", None)
        out.append({"error": lineno if type(lineno) is int else repr(lineno)})
        continue
    except Exception as e:
        out.append({"crash": "compile: " + type(e).__name__ + ": " + str(e)[:200]})
        continue
    try:
        ctx = build(context)
        first = t.render(ctx)
        second = t.render(build(context))
        if type(first) is not str or first != second:
            out.append({"crash": "render is not a stable str"})
        else:
            out.append({"out": first})
    except Exception as e:
        out.append({"crash": "render: " + type(e).__name__ + ": " + str(e)[:200]})
emit(out)
"""


def template_blocks() -> dict[str, str | bytes]:
    """Hand-written templates, bad ones with their error line, 300 random trees from the
    test's seed (``tests/template_cases.py``), rendered in one child within 60 s; each result
    the expected one. Reward 1 only when every case passes, as before."""
    return shipped_cases(
        "software-engineering-hard-template-blocks",
        "template_cases",
        code=_TEMPLATE_CALL,
        answer="/app/minitpl",
        timeout=60,
    )


_INVENTORY_CALL = """\
import os, tempfile
from inventory import load_items, summarize
scratch = tempfile.mkdtemp()
out = []
for k, text in enumerate(INPUT):
    path = os.path.join(scratch, f"export_{k}.csv")
    with open(path, "w", newline="") as f:
        f.write(text)
    items = load_items(path)
    out.append({"items": [[i.sku, i.name, i.category, i.quantity, i.unit_price] for i in items],
                "summary": {k: list(v) for k, v in summarize(items).items()}})
emit(out)
"""


def inventory_csv() -> dict[str, str | bytes]:
    """60 random exports from the test's seed through load_items and summarize in one child
    within 30 s (``tests/inventory_cases.py`` compares), then the command line's report on
    five of them, byte for byte. Reward 1 only when every check passes, as before."""
    task = "debugging-easy-inventory-csv"
    maker = pack_module(task, "inventory_cases")
    made = maker.cases()
    api = [hs.Case(f"export {k}", want=w) for k, w in enumerate(maker.expected(made))]
    cli = [
        hs.Case(
            f"cli on export {k}",
            files={"export.csv": made[k]},
            want={"stdout": maker.report(k), "files": {}},
        )
        for k in range(5)
    ]
    argv = ["python3", "-E", "-s", "-m", "inventory", "summary", "{in}/export.csv"]
    files = hs.tests(
        answer=hs.python_calls(hs.python_call(_INVENTORY_CALL, made), compile=["/app/inventory"]),
        cases=api,
        compare=hs.compare("function", module="inventory_cases", fn="check"),
        limits=hs.limits(timeout=30),
        kind="assert",
        modules={"inventory_cases.py": (PACK / task / "tests" / "inventory_cases.py").read_text()},
        timeout=100,
        also=[
            hs.part(
                answer=hs.program(argv),
                cases=cli,
                compare=hs.compare("output"),
                limits=hs.limits(timeout=30),
            )
        ],
    )
    return without_runtime(files)


_SPLITTER_CALL = """\
from splitter.money import parse_amount
from splitter.split import split_evenly
out = []
for text in INPUT["parse"]:
    try:
        v = parse_amount(text)
        out.append(v if type(v) is int else repr(v))
    except Exception as e:
        out.append("raised " + type(e).__name__)
for amount, n in INPUT["split"]:
    try:
        v = split_evenly(amount, n)
        out.append([x if type(x) is int else repr(x) for x in v])
    except Exception as e:
        out.append("raised " + type(e).__name__)
emit(out)
"""


def expense_splitter() -> dict[str, str | bytes]:
    """413 amounts through parse_amount and 408 splits through split_evenly in one child
    within 30 s, then the balances and settle commands on 25 expense files, byte for byte
    (cases and reference model: ``tests/splitter_cases.py``, from the test's seed). Reward 1
    only when every check passes, as before."""
    task = "debugging-medium-expense-splitter"
    ref = pack_module(task, "splitter_cases")
    parse, split, expense_files = ref.all_cases()
    calls = [
        hs.Case(f"{i}: parse_amount({t!r})", want=ref.ref_parse(t)) for i, t in enumerate(parse)
    ]
    calls += [
        hs.Case(f"{i}: split_evenly({a}, {n})", want=ref.ref_split(a, n))
        for i, (a, n) in enumerate(split, len(parse))
    ]
    cli = [
        hs.Case(
            f"`{cmd}` on file {k}",
            files={"expenses.txt": text},
            args=[cmd, "{in}/expenses.txt"],
            want={"stdout": want[cmd], "files": {}},
        )
        for k, (text, want) in enumerate(expense_files)
        for cmd in ("balances", "settle")
    ]
    call = hs.python_call(_SPLITTER_CALL, {"parse": parse, "split": split})
    files = hs.tests(
        answer=hs.python_calls(call, compile=["/app/splitter"]),
        cases=calls,
        compare=hs.compare("equal"),
        limits=hs.limits(timeout=30),
        kind="assert",
        timeout=100,
        also=[
            hs.part(
                answer=hs.program(["python3", "-E", "-s", "-m", "splitter"]),
                cases=cli,
                compare=hs.compare("output"),
                limits=hs.limits(timeout=30),
            )
        ],
    )
    return without_runtime(files)


_KV_CALL = """\
import os, tempfile
from kvstore import KVStore
scratch = tempfile.mkdtemp()
results = []
for n, script in enumerate(INPUT):
    path = os.path.join(scratch, f"store_{n}.kv")
    obs = []
    store = None
    try:
        for op in script:
            kind = op[0]
            if kind == "file":
                with open(path, "wb") as f:
                    f.write(bytes.fromhex(op[1]))
            elif kind == "open":
                store = KVStore(path)
            elif kind == "put":
                store.put(op[1], op[2])
            elif kind == "del":
                obs.append(["del", store.delete(op[1])])
            elif kind == "get":
                obs.append(["get", store.get(op[1], "<default>"), op[1] in store])
            elif kind == "compact":
                store.compact()
            elif kind == "reopen":
                store.close()
                store = KVStore(path)
            elif kind == "torn":
                store.close()
                with open(path, "ab") as f:
                    f.write(bytes.fromhex(op[1]))
                store = KVStore(path)
            elif kind == "snapshot":
                keys = store.keys()
                obs.append(["snapshot", keys, [store.get(k) for k in keys], len(store)])
        store.close()
    except Exception as e:
        obs.append(["error", type(e).__name__ + ": " + str(e)[:300]])
    results.append(obs)
emit(results)
"""


def kvstore_recovery() -> dict[str, str | bytes]:
    """36 operation scripts from the test's seed (``tests/kv_cases.py``) run against KVStore in
    one child within 60 s; each scenario's observations the model's, item by item. Reward 1
    only when every scenario passes, as before."""
    return shipped_cases(
        "debugging-hard-kvstore-recovery",
        "kv_cases",
        code=_KV_CALL,
        answer="/app/kvstore",
        timeout=60,
        label="scenario {i}",
        compare=hs.compare("items"),
    )


#: Each scenario's steps run as ``python3 -m todo`` on one data file, from the child (all in
#: the run's jail, as nobody); what each step printed and left in the file is reported.
_TODO_CALL = """\
import json, os, subprocess, sys, tempfile


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


out = []
for n, scenario in enumerate(INPUT):
    home = tempfile.mkdtemp()
    path = os.path.join(home, f"todo{n}.json")
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "TODO_FILE": path,
           "TODO_TODAY": scenario["today"]}
    if scenario["v1"] is not None:
        with open(path, "w") as f:
            json.dump(scenario["v1"], f)
    seen = []
    for args in scenario["steps"]:
        before = read(path)
        try:
            proc = subprocess.run([sys.executable, "-E", "-s", "-m", "todo", *args],
                                  cwd=os.getcwd(), env=env, capture_output=True, text=True,
                                  timeout=30)
            rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr[-300:]
        except subprocess.TimeoutExpired:
            rc, stdout, stderr = None, "", "timed out after 30 s"
        after = read(path)
        seen.append({"rc": rc, "stdout": stdout, "stderr": stderr, "changed": after != before,
                     "file": after})
    out.append(seen)
emit(out)
"""


def todo_due_dates() -> dict[str, str | bytes]:
    """Ten command sequences from the test's seed (``tests/todo_cases.py``), each step's exit
    status, output and data file compared with the reference model's; within 110 s in all
    (30 s a step: its 120 interpreter starts take most of it on a busy machine). Reward 1 only when every scenario passes, as before."""
    return shipped_cases(
        "software-engineering-medium-todo-due-dates",
        "todo_cases",
        code=_TODO_CALL,
        answer="/app/todo",
        timeout=110,
        alarm=115,
        label="scenario {i}",
        compare=hs.compare("function", module="todo_cases", fn="check"),
    )


#: Task id -> the builder of its ``tests/`` harness files.
BUILDERS = {
    "software-engineering-easy-env-overrides": env_overrides,
    "software-engineering-hard-template-blocks": template_blocks,
    "debugging-easy-inventory-csv": inventory_csv,
    "debugging-medium-expense-splitter": expense_splitter,
    "debugging-hard-kvstore-recovery": kvstore_recovery,
    "software-engineering-medium-todo-due-dates": todo_due_dates,
}
