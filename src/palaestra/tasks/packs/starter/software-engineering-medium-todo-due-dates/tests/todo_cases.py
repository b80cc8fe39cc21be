"""The to-do scenarios (from the test's fixed seed): command sequences, some starting from a
version-1 file, with what a reference model expects of each step (exit status, output, the
data file), and the comparison (the harness's ``function`` comparison)."""

import datetime as dt
import json
import random

SEED = 90210


PRI = {"high": 0, "normal": 1, "low": 2}


class Model:
    def __init__(self, v1_tasks=None):
        self.tasks = []
        self.next_id = 1
        if v1_tasks is not None:
            self.tasks = [dict(t, due=None, priority="normal") for t in v1_tasks]
            self.next_id = max((t["id"] for t in v1_tasks), default=0) + 1

    def file(self):
        return {"version": 2, "next_id": self.next_id,
                "tasks": sorted(self.tasks, key=lambda t: t["id"])}

    def find(self, i):
        return next((t for t in self.tasks if t["id"] == i), None)

    def listing(self, all_, overdue, sort, today):
        shown = [t for t in self.tasks if all_ or not t["done"]]
        if overdue:
            shown = [t for t in shown if not t["done"] and t["due"] and t["due"] < today]
        key = {"id": lambda t: t["id"],
               "due": lambda t: (t["due"] is None, t["due"] or "", t["id"]),
               "priority": lambda t: (PRI[t["priority"]], t["id"])}[sort]
        return sorted(shown, key=key)


def text(t):
    line = f"[{'x' if t['done'] else ' '}] {t['id']}  {t['title']}"
    if t["due"]:
        line += f"  due:{t['due']}"
    if t["priority"] != "normal":
        line += f"  priority:{t['priority']}"
    return line


TITLES = ["Buy milk", "Call Bob", "Pay rent", "Fix bike", "Écrire à Zoë", "Review PR #42",
          "Book flights", "Tax return", "Water plants", "Plan trip (maybe)"]
BAD_DATES = ["2024-02-30", "tomorrow", "2024-5-1", "20240501", "2024-13-01", ""]


def valid_date(text):
    try:
        return len(text) == 10 and dt.date.fromisoformat(text).isoformat() == text
    except ValueError:
        return False


def apply(model, args, today):
    """Update the model for one command; return the expected (exit status, stdout)."""
    cmd, rest = args[0], args[1:]
    if cmd == "add":
        opts = dict(zip(rest[1::2], rest[2::2]))
        due, prio = opts.get("--due"), opts.get("--priority", "normal")
        if (due is not None and not valid_date(due)) or prio not in PRI:
            return 2, None
        tid = model.next_id
        model.next_id += 1
        model.tasks.append({"id": tid, "title": rest[0], "done": False, "due": due,
                            "priority": prio})
        return 0, f"added {tid}\n"
    if cmd in ("done", "remove"):
        t = model.find(int(rest[0]))
        if t is None:
            return 1, ""
        if cmd == "done":
            t["done"] = True
        else:
            model.tasks.remove(t)
        return 0, ""
    opts = {a: rest[i + 1] for i, a in enumerate(rest) if a in ("--sort", "--format")}
    rows = model.listing("--all" in rest, "--overdue" in rest, opts.get("--sort") or "id", today)
    if opts.get("--format") == "json":
        return 0, ("json", rows)
    return 0, "".join(text(t) + "\n" for t in rows)


FIXED = [["add", "A", "--due", "2024-05-10", "--priority", "low"], ["add", "B"],
         ["add", "C", "--due", "2024-04-01", "--priority", "high"], ["add", "D", "--due", "2024-05-10"],
         ["done", "4"], ["list", "--sort", "due"], ["list", "--all", "--sort", "due", "--format", "json"],
         ["list", "--sort", "priority"], ["list", "--overdue"], ["list", "--all", "--overdue"],
         ["remove", "4"], ["add", "E"], ["add", "F", "--due", "2024-02-30"],
         ["add", "G", "--priority", "urgent"], ["list", "--all", "--format", "json"],
         ["list", "--all", "--sort", "due"]]


def random_args(rng, model):
    r = rng.random()
    ids = [t["id"] for t in model.tasks]
    if r < 0.35:
        args = ["add", rng.choice(TITLES)]
        if rng.random() < 0.6:
            due = rng.choice(BAD_DATES) if rng.random() < 0.12 else (
                dt.date(2024, 4, 1) + dt.timedelta(days=rng.randint(0, 120))).isoformat()
            args += ["--due", due]
        if rng.random() < 0.5:
            args += ["--priority", rng.choice(["low", "normal", "high", "high", "urgent"])]
        return args
    if r < 0.5:
        return ["done", str(rng.choice(ids + [99]) if ids else 99)]
    if r < 0.62:
        tid = (max(ids) if rng.random() < 0.6 else rng.choice(ids + [77])) if ids else 77
        return ["remove", str(tid)]
    args = ["list"] + (["--all"] if rng.random() < 0.4 else [])
    args += ["--overdue"] if rng.random() < 0.3 else []
    sort, fmt = rng.choice([None, "id", "due", "priority"]), rng.choice([None, "text", "json"])
    return args + (["--sort", sort] if sort else []) + (["--format", fmt] if fmt else [])


def make_scenario(rng, n, script=None):
    """One scenario's input (today, a version-1 file or None, the steps' arguments) and each
    step's expectation (``rc``; ``stdout`` or ``json`` rows when compared; ``file``, the
    data file after it, or None where the file must not change)."""
    today = "2024-05-05" if script else (
        dt.date(2024, 5, 1) + dt.timedelta(days=rng.randint(0, 60))).isoformat()
    model, v1 = Model(), None
    if n % 3 == 1:  # an existing version-1 file
        v1 = [{"id": i, "title": rng.choice(TITLES), "done": rng.random() < 0.3}
              for i in sorted(rng.sample(range(1, 9), rng.randint(0, 4)))]
        model = Model(v1)
    steps, wants = [], []
    for args in script or [None] * rng.randint(8, 14):
        args = args or random_args(rng, model)
        rc, out = apply(model, args, today)
        want = {"rc": rc}
        if isinstance(out, tuple):
            want["json"] = [{k: t[k] for k in ("id", "title", "done", "due", "priority")}
                            for t in out[1]]
        elif out is not None:
            want["stdout"] = out
        changes = args[0] != "list" and rc == 0
        want["file"] = json.loads(json.dumps(model.file())) if changes else None
        steps.append(args)
        wants.append(want)
    return {"today": today, "v1": v1, "steps": steps}, {"args": steps, "steps": wants}


def all_cases():
    rng = random.Random(SEED)
    return [make_scenario(rng, 0, FIXED)] + [make_scenario(rng, n) for n in range(1, 10)]


def cases():
    return [scenario for scenario, _ in all_cases()]


def expected(made):
    return [want for _, want in all_cases()]


def problem(args, want, got):
    """What is wrong with one step (None: nothing)."""
    if got["rc"] != want["rc"]:
        return f"exit {got['rc']}, expected {want['rc']}; stderr {got['stderr']!r}"
    if "json" in want:
        try:
            rows = json.loads(got["stdout"])
        except ValueError:
            rows = got["stdout"]
        if rows != want["json"]:
            return f"json {str(rows)[:300]} expected {str(want['json'])[:300]}"
    elif "stdout" in want and got["stdout"] != want["stdout"]:
        return f"printed {got['stdout']!r}, expected {want['stdout']!r}"
    if want["file"] is None:
        return "the data file changed" if got["changed"] else None
    try:
        data = json.loads(got["file"])
        data["tasks"] = sorted(data["tasks"], key=lambda t: t["id"])
    except Exception:
        data = got["file"]
    if data != want["file"]:
        return f"file {str(data)[:300]} expected {str(want['file'])[:300]}"
    return None


def check(ck, label, want, got, options):
    """One check a scenario: its first step that differs from the model's."""
    if not isinstance(got, list) or len(got) != len(want["steps"]):
        ck.check(label, False, f"reported {str(got)[:200]}")
        return
    for step, (args, w, g) in enumerate(zip(want["args"], want["steps"], got)):
        try:
            found = problem(args, w, g)
        except (KeyError, TypeError) as e:
            found = f"reported {str(g)[:200]} ({e!r})"
        if found:
            ck.check(label, False, f"step {step}: todo {' '.join(args)}: {found}")
            return
    ck.check(label, True)
