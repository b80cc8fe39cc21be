"""The hidden tests of the starter file-operations tasks whose answer is a program run on
trees (dedupe-tree, snapshot-backup), as declarative harness specs: the trees travel as data
(``TREE``, Python of the task's ``tests/`` module that the checker's child and this builder
both run), the child runs the agent's program on them from within the run's jail, and the
expected states are fixed here, when the spec is built.
:mod:`palaestra.tasks.starter_harness` lists them with the others and writes them."""

from __future__ import annotations

import tempfile

from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.starter_harness_calls import PACK, pack_module, without_runtime

#: After ``dedupe_cases.TREE`` (build, snapshot, content): each tree built in the child's
#: own directory, dedupe.py run on it twice (as the child: nobody, in the run's jail), what
#: it printed and left looked at without following links; then the copy of /app/shared.
_DEDUPE_CALL = """
import subprocess, sys, tempfile
APP = os.getcwd()


def run(root):
    try:
        p = subprocess.run([sys.executable, "-E", "-s", os.path.join(APP, "dedupe.py"), root],
                           cwd=APP, capture_output=True, text=True, timeout=60)
        return {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr[-1500:]}
    except subprocess.TimeoutExpired:
        return {"rc": None, "stdout": "", "stderr": "timed out after 60 s"}


out = []
for desc in INPUT:
    root = os.path.join(tempfile.mkdtemp(), "tree")
    build(root, desc)
    originals = [rel for rel, e in snapshot(root).items() if e[0] == "file"]
    first = run(root)
    after = snapshot(root)
    contents = {rel: content(root, rel) for rel in originals}
    second = run(root)
    out.append({"first": first, "after": after, "content": contents, "second": second,
                "again": snapshot(root)})
shared = os.path.join(APP, "shared")
out.append({"shared": snapshot(shared) if os.path.isdir(shared) else None})
emit(out)
"""


def dedupe_tree() -> dict[str, str | bytes]:
    """Two hidden trees (``tests/dedupe_cases.py``, from the test's seeds) deduplicated by
    dedupe.py twice each, and /app/shared as the agent left it: 17 checks, within 90 s.
    Reward: the fraction of the 17 passed, as before (0 without /app/dedupe.py)."""
    task = "file-operations-medium-dedupe-tree"
    maker = pack_module(task, "dedupe_cases")
    with tempfile.TemporaryDirectory(prefix="palaestra-starter-") as tmp:
        trees, wants = maker.cases(tmp)
    answer = hs.python_calls(hs.python_call(maker.TREE + _DEDUPE_CALL, trees))
    answer["require"] = "/app/dedupe.py"  # none: no credit, as before
    labels = ["tree1", "tree2", "workspace"]
    files = hs.tests(
        answer=answer,
        cases=[hs.Case(label, want=w) for label, w in zip(labels, wants, strict=True)],
        compare=hs.compare("function", module="dedupe_cases", fn="check"),
        limits=hs.limits(timeout=90),
        kind="assert",
        modules={"dedupe_cases.py": (PACK / task / "tests" / "dedupe_cases.py").read_text()},
        timeout=110,
        reward="partial",
    )
    return without_runtime(files)


#: After ``snap_cases.TREE`` (build_tree, mutate, describe): the tree built in the child's
#: own directory, three backups (the tree changed after the first), list, the restores out
#: of order and of an unknown id, run from the child (nobody, in the run's jail); the trees
#: described without following links, the store's objects hashed (links reported).
_SNAP_CALL = """
import subprocess, sys, tempfile
APP = os.getcwd()


def snap(*args):
    try:
        p = subprocess.run([sys.executable, "-E", "-s", os.path.join(APP, "snap.py"), *args],
                           cwd=tempfile.gettempdir(), capture_output=True, timeout=60)
        return {"rc": p.returncode, "stdout": p.stdout.decode(errors="replace"),
                "stderr": p.stderr[-1500:].decode(errors="replace")}
    except subprocess.TimeoutExpired:
        return {"rc": None, "stdout": "", "stderr": "timed out after 60 s"}


def objects(repo):
    found = []
    for dirpath, _, files in os.walk(os.path.join(repo, "objects")):
        for name in files:
            full = os.path.join(dirpath, name)
            if not stat.S_ISREG(os.lstat(full).st_mode):
                return {"link": full}
            with open(full, "rb") as f:
                found.append(hashlib.sha256(f.read()).hexdigest())
    return found


work = tempfile.mkdtemp()
src, repo = os.path.join(work, "src"), os.path.join(work, "repo")
build_tree(src, INPUT["big_seed"])
report = {"backups": [], "restores": []}
for step in range(3):
    backup = snap("backup", src, repo)
    backup["source"] = describe(src)
    report["backups"].append(backup)
    if backup["rc"] != 0:
        break
    if step == 0:
        mutate(src)
if len(report["backups"]) == 3:
    ids = [b["stdout"].split("\\n")[0] for b in report["backups"]]
    report["list"] = snap("list", repo)
    for n in (2, 0, 1):
        dest = os.path.join(work, "restore%d" % n)
        restore = snap("restore", repo, ids[n], dest)
        restore["tree"] = describe(dest) if os.path.isdir(dest) else {}
        report["restores"].append(restore)
    report["unknown_rc"] = snap("restore", repo, "no-such-snapshot", os.path.join(work, "x"))["rc"]
    report["objects"] = objects(repo)
emit([report])
"""


def snapshot_backup() -> dict[str, str | bytes]:
    """The tricky tree's three snapshots (``tests/snap_cases.py``: its every mode and mtime
    set, its large file from a seed) backed up, listed and restored by snap.py from one child
    within 100 s; one check, each restore the exact description, fixed here, of the tree it
    was taken of. Reward 1 only when it all holds, as before."""
    task = "file-operations-hard-snapshot-backup"
    maker = pack_module(task, "snap_cases")
    states = maker.states()
    contents = sorted({e[3] for st in states for e in st.values() if e[0] == "file"})
    answer = hs.python_calls(hs.python_call(maker.TREE + _SNAP_CALL, {"big_seed": 1}))
    answer["require"] = "/app/snap.py"
    files = hs.tests(
        answer=answer,
        cases=[
            hs.Case("3 snapshots restored exactly", want={"states": states, "contents": contents})
        ],
        compare=hs.compare("function", module="snap_cases", fn="check"),
        limits=hs.limits(timeout=100),
        kind="assert",
        modules={"snap_cases.py": (PACK / task / "tests" / "snap_cases.py").read_text()},
        timeout=110,
    )
    return without_runtime(files)


#: Task id -> the builder of its ``tests/`` harness files.
BUILDERS = {
    "file-operations-medium-dedupe-tree": dedupe_tree,
    "file-operations-hard-snapshot-backup": snapshot_backup,
}
