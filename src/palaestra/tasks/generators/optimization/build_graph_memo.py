"""build-graph-memo: a build planner that recomputes every dependency chain from scratch
(exponential on a layered graph) and needs memoisation.

The program reads a build graph ("target: deps | cost") and prints each target's critical
path; from medium on also the number of dependency chains (mod 1e9+7), on hard also the
longest chain length. Each is a plain recursive function, so shared sub-graphs are recomputed
once per path through them. Difficulty knobs: the graph size and the number of recursive
quantities (memoising only some of them stays exponential). Output must stay byte-identical
on fresh secret graphs (redefinitions, repeated and external dependencies, comments); the
large graph runs under a CPU bar.

The reference's output is made when the task is generated (see ``_bench``): integer
arithmetic over a graph no deeper than 60 layers prints the same on any Python 3.
"""

from __future__ import annotations

import textwrap

from palaestra.tasks.generators import family, solve_sh_writing
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.optimization._bench import apply_edits, bench_tests

_PROGRAMS = ["buildplan.py", "critical_path.py", "depgraph.py", "plan_targets.py"]

_HEADER = '''\
"""Critical path of every build target.

    python3 {program} GRAPH_FILE

Each line reads "target: dep dep ... | cost" (cost: integer milliseconds); blank lines and
"#" comments are ignored. A target defined again replaces its earlier definition but keeps
its place. A dependency listed twice in one line counts once. A dependency without a
definition is an external artifact: it costs EXTERNAL_MS and has no dependencies. The graph
has no cycles.

For each target, in order of first definition, prints a tab-separated line:
the name, its critical path (its own cost plus the largest critical path among its
dependencies){paths_doc}{depth_doc}.
"""

import sys

EXTERNAL_MS = {external}
MOD = 1_000_000_007


def parse(text):
    graph = {{}}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        head, _, cost = line.rpartition("|")
        name, _, deps = head.partition(":")
        graph[name.strip()] = (list(dict.fromkeys(deps.split())), int(cost))
    return graph


def main(path):
    with open(path) as f:
        graph = parse(f.read())
    sys.setrecursionlimit(20000)
'''

_FUNCS = {
    "critical": (
        """\
    def critical(t):
        if t not in graph:
            return EXTERNAL_MS
        deps, cost = graph[t]
        return cost + max((critical(d) for d in deps), default=0)
""",
        """\
    critical_memo = {}

    def critical(t):
        if t not in critical_memo:
            if t not in graph:
                critical_memo[t] = EXTERNAL_MS
            else:
                deps, cost = graph[t]
                critical_memo[t] = cost + max((critical(d) for d in deps), default=0)
        return critical_memo[t]
""",
    ),
    "paths": (
        """\
    def paths(t):
        if t not in graph or not graph[t][0]:
            return 1
        return sum(paths(d) for d in graph[t][0]) % MOD
""",
        """\
    paths_memo = {}

    def paths(t):
        if t not in paths_memo:
            if t not in graph or not graph[t][0]:
                paths_memo[t] = 1
            else:
                paths_memo[t] = sum(paths(d) for d in graph[t][0]) % MOD
        return paths_memo[t]
""",
    ),
    "depth": (
        """\
    def depth(t):
        if t not in graph or not graph[t][0]:
            return 0
        return 1 + max(depth(d) for d in graph[t][0])
""",
        """\
    depth_memo = {}

    def depth(t):
        if t not in depth_memo:
            if t not in graph or not graph[t][0]:
                depth_memo[t] = 0
            else:
                depth_memo[t] = 1 + max(depth(d) for d in graph[t][0])
        return depth_memo[t]
""",
    ),
}

_FOOTER = """
    out = []
    for t in graph:
        out.append("\\t".join(str(v) for v in ({columns})))
    sys.stdout.write("\\n".join(out) + ("\\n" if out else ""))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
"""


def _program(program: str, funcs: list[str], external: int, memo: set[str]) -> str:
    paths_doc = ", the number of distinct dependency chains from it down to targets without dependencies or external artifacts (mod 1_000_000_007)"  # noqa: E501
    depth_doc = ", and the length (in edges) of its longest dependency chain"
    header = _HEADER.format(
        program=program,
        external=external,
        paths_doc=paths_doc if "paths" in funcs else "",
        depth_doc=depth_doc if "depth" in funcs else "",
    )
    body = "\n".join(_FUNCS[f][1 if f in memo else 0] for f in funcs)
    columns = ", ".join(["t"] + [f"{f}(t)" for f in funcs])
    return header + "\n" + body + _FOOTER.format(columns=columns)


_INPUTS = r'''
def make_inputs(rng, n):
    """A layered build graph of about n targets, lines shuffled, with repeated and external
    dependencies, redefinitions and comments."""
    words = ["core", "util", "net", "db", "ui", "api", "auth", "log", "cfg", "img", "pdf", "ml"]
    n_layers = max(2, min(60, n // 25 + 1))
    layers = [[] for _ in range(n_layers)]
    for i in range(n):
        layers[min(n_layers - 1, i * n_layers // max(1, n))].append(
            "{}-{}{}".format(rng.choice(words), rng.choice("abcdefgh"), i))
    lines = []
    for li, layer in enumerate(layers):
        below = [t for lower in layers[li + 1:li + 3] for t in lower]
        for t in layer:
            deps = rng.sample(below, min(len(below), rng.randrange(1, 4))) if below else []
            if deps and rng.random() < 0.1:
                deps.append(deps[0])
            if rng.random() < 0.08 or (not below and t == layer[0]):
                deps.append("@ext/{}{}".format(rng.choice(words), rng.randrange(20)))
            lines.append("{}: {} | {}".format(t, " ".join(deps), rng.randrange(1, 500)))
            if below and rng.random() < 0.03:
                lines.append("{}:{}|{}".format(t, " ".join(rng.sample(below, 1)), rng.randrange(1, 500)))
    rng.shuffle(lines)
    for _ in range(max(1, n // 50)):
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(["", "# generated", "   "]))
    return {"graph.txt": "\n".join(lines) + "\n"}
'''


@family(
    "build-graph-memo",
    category="optimization",
    summary="Exponential build-graph recursion (1-3 quantities) to memoise under a CPU bar",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    program = rng.choice(_PROGRAMS)
    funcs = {"easy": ["critical"], "medium": ["critical", "paths"],
             "hard": ["critical", "paths", "depth"]}[spec.tier]  # fmt: skip
    external = rng.randrange(5, 60)
    slow = _program(program, funcs, external, set())
    fast = _program(program, funcs, external, set(funcs))
    big = spec.iscale(6_000, 15_000)
    secret = rng.randrange(2**31)
    scope: dict = {}
    exec(_INPUTS, scope)
    sample = scope["make_inputs"](rng, 120)["graph.txt"]

    wrongs = {
        # the memo dict is rebuilt for every printed target: quadratic
        "memo-per-target": apply_edits(
            fast,
            [
                (
                    "    out = []\n    for t in graph:\n",
                    "    out = []\n    for t in graph:\n"
                    + "".join(f"        {f}_memo.clear()\n" for f in funcs),
                )
            ],  # fmt: skip
        ),
        # a redefinition keeps the first definition
        "first-definition-wins": apply_edits(
            fast,
            [
                (
                    "        graph[name.strip()] = (",
                    "        graph.setdefault(name.strip(), None)\n"
                    "        if graph[name.strip()] is None:\n            graph[name.strip()] = (",
                )
            ],  # fmt: skip
        ),
        # external artifacts are ignored instead of costing EXTERNAL_MS
        "externals-ignored": apply_edits(
            fast, [("critical_memo[t] = EXTERNAL_MS", "critical_memo[t] = 0")]
        ),
    }
    if len(funcs) > 1:  # memoises only the critical path
        wrongs["only-critical-memoised"] = _program(program, funcs, external, {"critical"})
        # repeated dependencies counted twice
        wrongs["repeated-deps-counted"] = apply_edits(
            fast, [("(list(dict.fromkeys(deps.split())), int(cost))", "(deps.split(), int(cost))")]
        )
    instruction = textwrap.dedent(
        f"""\
        # Make the build planner fast

        `/app/{program}` prints the critical path of every target of a build graph
        (`python3 /app/{program} graph.txt`; a small example is `/app/graph.txt`; the
        program's docstring describes the format and every column). It gives the right
        answers, but on our real graph it never finishes.

        Make it fast: on a graph of {big:,} targets it must finish within 2 seconds of CPU
        time (it will be measured on such a graph). Its output must stay **byte-for-byte
        identical** to what the current program prints, for every valid graph. Keep the
        command line; only the standard library is available.
        """
    )
    return GeneratedTask(
        instruction=instruction,
        workspace={program: slow, "graph.txt": sample},
        tests={
            **bench_tests(
                reference=fast,
                ship_big=True,
                program=program,
                inputs_code=_INPUTS,
                args=["graph.txt"],
                secret=secret,
                small_sizes=[1, 12, 150],
                big_size=big,
                cpu_bar=2,
            ),
        },
        solution={"solve.sh": solve_sh_writing({program: fast}, note="memoised recursion")},
        wrong_solutions={
            name: {"solve.sh": solve_sh_writing({program: src}, note=f"wrong: {name}")}
            for name, src in wrongs.items()
        },
        tags=("python", "optimization", "memoisation", "graphs"),
        verifier_timeout_sec=240.0,
    )
