"""kv-store-go: extend a Go key-value shell (SET/GET/DELETE over standard input) with new
commands.

Easy: ``COUNT value`` and ``KEYS prefix`` (sorted; a marker when none). Medium adds
transactions (``BEGIN``, ``ROLLBACK``, ``COMMIT``; the error line when none is open) that every
command, ``COUNT`` and ``KEYS`` included, must see through. Hard nests them: ``COMMIT`` merges
the innermost transaction into the one around it and longer sessions nest several deep. The
hidden test (harness data) builds the agent's module with ``go build`` as ``nobody`` and
compares each session's output with a Python model's, both made from the task's secret when
the task is generated.
"""

from __future__ import annotations

import textwrap

from palaestra.tasks.generators import family
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators._toolchains import GO, REWARD_OUTCOMES, stdin_tests
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.optimization._bench import apply_edits

_MISSING = ["NULL", "(nil)", "<missing>", "NOT FOUND"]
_NONE = ["(none)", "(empty)", "NO KEYS", "-"]
_NO_TX = ["NO TRANSACTION", "ERR no transaction", "nothing to do"]

_STARTER = """\
// kvsh: a tiny in-memory key-value shell. One command per line on standard input:
//
//	SET key value    store value under key
//	GET key          print the value, or MISSING_MARK
//	DELETE key       remove key (no output; a missing key is fine)
//
// Keys and values are single words. Blank lines are skipped; any other command prints
// "UNKNOWN COMMAND".
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

func main() {
	data := map[string]string{}
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "SET" && len(f) == 3:
			data[f[1]] = f[2]
		case f[0] == "GET" && len(f) == 2:
			if v, ok := data[f[1]]; ok {
				fmt.Fprintln(out, v)
			} else {
				fmt.Fprintln(out, "MISSING_MARK")
			}
		case f[0] == "DELETE" && len(f) == 2:
			delete(data, f[1])
		default:
			fmt.Fprintln(out, "UNKNOWN COMMAND")
		}
	}
}
"""

_ORACLE = """\
// kvsh: a tiny in-memory key-value shell with transactions. See the task for the commands.
package main

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strings"
)

type store struct {
	data   map[string]string
	layers []map[string]*string // open transactions' pending changes; nil marks a delete
}

func (s *store) get(k string) (string, bool) {
	for i := len(s.layers) - 1; i >= 0; i-- {
		if v, ok := s.layers[i][k]; ok {
			if v == nil {
				return "", false
			}
			return *v, true
		}
	}
	v, ok := s.data[k]
	return v, ok
}

func (s *store) put(k string, v *string) {
	if len(s.layers) > 0 {
		s.layers[len(s.layers)-1][k] = v
		return
	}
	if v == nil {
		delete(s.data, k)
	} else {
		s.data[k] = *v
	}
}

func (s *store) keys() []string {
	seen := map[string]bool{}
	for k := range s.data {
		seen[k] = true
	}
	for _, layer := range s.layers {
		for k := range layer {
			seen[k] = true
		}
	}
	out := []string{}
	for k := range seen {
		if _, ok := s.get(k); ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (s *store) commit() {
	top := s.layers[len(s.layers)-1]
	s.layers = s.layers[:len(s.layers)-1]
	for k, v := range top {
		s.put(k, v)
	}
}

func main() {
	s := &store{data: map[string]string{}}
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "SET" && len(f) == 3:
			v := f[2]
			s.put(f[1], &v)
		case f[0] == "GET" && len(f) == 2:
			if v, ok := s.get(f[1]); ok {
				fmt.Fprintln(out, v)
			} else {
				fmt.Fprintln(out, "MISSING_MARK")
			}
		case f[0] == "DELETE" && len(f) == 2:
			s.put(f[1], nil)
		case f[0] == "COUNT" && len(f) == 2:
			n := 0
			for _, k := range s.keys() {
				if v, _ := s.get(k); v == f[1] {
					n++
				}
			}
			fmt.Fprintln(out, n)
		case f[0] == "KEYS" && len(f) == 2:
			found := []string{}
			for _, k := range s.keys() {
				if strings.HasPrefix(k, f[1]) {
					found = append(found, k)
				}
			}
			if len(found) == 0 {
				fmt.Fprintln(out, "NONE_MARK")
			} else {
				fmt.Fprintln(out, strings.Join(found, " "))
			}
		case f[0] == "BEGIN" && len(f) == 1:
			s.layers = append(s.layers, map[string]*string{})
		case (f[0] == "ROLLBACK" || f[0] == "COMMIT") && len(f) == 1:
			if len(s.layers) == 0 {
				fmt.Fprintln(out, "NO_TX_MARK")
			} else if f[0] == "ROLLBACK" {
				s.layers = s.layers[:len(s.layers)-1]
			} else {
				s.commit()
			}
		default:
			fmt.Fprintln(out, "UNKNOWN COMMAND")
		}
	}
}
"""

# Python, run when the task is generated (and shipped as tests/program_inputs.py): sessions
# and the model's output.
_CASES = r"""
MISSING, NONE, NO_TX, TX, DEPTH, LENGTH = {params}
KEYS = ["ab", "abc", "b", "ba", "bad", "c1", "c2", "cab"]
VALUES = ["1", "2", "red", "blue"]


def session(rng, length):
    lines, depth = [], 0
    for _ in range(length):
        r = rng.random()
        if TX and r < 0.2:
            if depth < DEPTH and (depth == 0 or rng.random() < 0.5):
                lines.append("BEGIN")
                depth += 1
            else:
                lines.append(rng.choice(["ROLLBACK", "COMMIT"]))
                depth = max(0, depth - 1)
        elif TX and r < 0.23:
            lines.append(rng.choice(["ROLLBACK", "COMMIT"]))  # maybe with none open
            depth = max(0, depth - 1)
        elif r < 0.5:
            lines.append("SET {{}} {{}}".format(rng.choice(KEYS), rng.choice(VALUES)))
        elif r < 0.62:
            lines.append("DELETE " + rng.choice(KEYS))
        elif r < 0.72:
            lines.append("GET " + rng.choice(KEYS))
        elif r < 0.84:
            lines.append("COUNT " + rng.choice(VALUES))
        else:
            lines.append("KEYS " + rng.choice(["a", "ab", "b", "c", "ca", "z", "bad"]))
    return "\n".join(lines) + "\n"


def make_cases(rng):
    return [("session {{}}".format(k + 1), session(rng, LENGTH), None) for k in range(5)]


def case_input(rng, index):
    # case index's input, made again in the checker
    return make_cases(rng)[index][1]


def expected(stdin):
    data, layers, out = dict(), [], []

    def view():
        merged = dict(data)
        for layer in layers:
            for k, v in layer.items():
                if v is None:
                    merged.pop(k, None)
                else:
                    merged[k] = v
        return merged

    def put(k, v):
        if layers:
            layers[-1][k] = v
        elif v is None:
            data.pop(k, None)
        else:
            data[k] = v

    for line in stdin.splitlines():
        f = line.split()
        if f[0] == "SET":
            put(f[1], f[2])
        elif f[0] == "DELETE":
            put(f[1], None)
        elif f[0] == "GET":
            out.append(view().get(f[1], MISSING))
        elif f[0] == "COUNT":
            out.append(str(sum(1 for v in view().values() if v == f[1])))
        elif f[0] == "KEYS":
            found = sorted(k for k in view() if k.startswith(f[1]))
            out.append(" ".join(found) if found else NONE)
        elif f[0] == "BEGIN":
            layers.append({{}})
        elif not layers:
            out.append(NO_TX)
        elif f[0] == "ROLLBACK":
            layers.pop()
        else:
            for k, v in layers.pop().items():
                put(k, v)
    return "\n".join(out) + "\n"
"""


def _doc(tier: str, none: str, no_tx: str) -> str:
    doc = textwrap.dedent(
        f"""\
        - `COUNT value`: print how many keys currently hold exactly `value`.
        - `KEYS prefix`: print the keys starting with `prefix`, sorted (byte order), separated
          by one space; `{none}` when there are none.
        """
    )
    if tier == "easy":
        return doc
    doc += textwrap.dedent(
        f"""\
        - `BEGIN`: open a transaction. Later changes are visible to every command at once but
          only become permanent with `COMMIT`; `ROLLBACK` discards them (sets and deletes).
        - `COMMIT` / `ROLLBACK` with no transaction open: print `{no_tx}`.
        """
    )
    if tier == "medium":
        return doc + "\nSessions open at most one transaction at a time.\n"
    return doc + (
        "\nTransactions nest: `BEGIN` inside a transaction opens an inner one; `COMMIT` merges\n"
        "the innermost transaction into the one around it (permanent only when the outermost\n"
        "commits) and `ROLLBACK` discards only the innermost.\n"
    )


@family(
    "kv-store-go",
    category="software-engineering",
    summary="Go: add COUNT/KEYS, then (nested) transactions to a key-value shell",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    missing, none, no_tx = rng.choice(_MISSING), rng.choice(_NONE), rng.choice(_NO_TX)
    tx = spec.tier != "easy"
    depth = 1 if spec.tier == "medium" else 3
    length = spec.iscale(40, 400)
    cases = _CASES.format(params=repr((missing, none, no_tx, tx, depth, length)))
    marks = {"MISSING_MARK": missing, "NONE_MARK": none, "NO_TX_MARK": no_tx}
    oracle = _ORACLE
    for mark, text in marks.items():
        oracle = oracle.replace(mark, text)
    wrongs = {
        # Go map order: keys come out in a random order
        "keys-unsorted": apply_edits(oracle, [("\tsort.Strings(out)\n", ""), ('\t"sort"\n', "")]),
        # a prefix matched anywhere in the key
        "prefix-anywhere": apply_edits(
            oracle, [("strings.HasPrefix(k, f[1])", "strings.Contains(k, f[1])")]
        ),
        # an empty answer printed as an empty line
        "keys-none-blank": apply_edits(
            oracle, [(f'fmt.Fprintln(out, "{none}")', 'fmt.Fprintln(out, "")')]
        ),
    }
    if tx:
        # deletes bypass the open transaction: a rollback does not bring the key back
        wrongs["rollback-keeps-deletes"] = apply_edits(
            oracle, [("\tif len(s.layers) > 0 {\n", "\tif len(s.layers) > 0 && v != nil {\n")]
        )
        # COMMIT/ROLLBACK with none open say nothing
        wrongs["no-transaction-silent"] = apply_edits(
            oracle, [(f'\t\t\t\tfmt.Fprintln(out, "{no_tx}")\n', "")]
        )
    if spec.tier == "hard":
        # COMMIT makes every open transaction permanent, not only the innermost
        wrongs["commit-closes-all"] = apply_edits(
            oracle,
            [
                (
                    "\t\t\t\ts.commit()\n",
                    "\t\t\t\tfor len(s.layers) > 0 {\n\t\t\t\t\ts.commit()\n\t\t\t\t}\n",
                )
            ],
        )
    starter = _STARTER.replace("MISSING_MARK", missing)
    instruction = (
        textwrap.dedent(
            """\
        # New commands for the key-value shell

        `/app/main.go` is `kvsh`, a small in-memory key-value shell that reads one command per
        line from standard input (its header comment lists what it does today). Add:

        """
        )
        + _doc(spec.tier, none, no_tx)
        + textwrap.dedent(
            f"""
        Keep what works today (`SET`, `GET` printing `{missing}` for a missing key, `DELETE`,
        blank lines, `UNKNOWN COMMAND`); output goes to standard output, one line per answer.
        The module is built with `{GO.build_line}` (in /app, Go from the distribution, no
        network: the standard library only) and run as `./prog < session.txt`.
        """
        )
    )
    return hs.task(
        instruction=instruction,
        workspace={"main.go": starter, "go.mod": "module kvsh\n\ngo 1.19\n"},
        tests=stdin_tests(GO, code=cases, secret=rng.randrange(2**31)),
        answer_path=GO.source,
        reference=oracle,
        wrongs=wrongs,
        note="a layered store",
        tags=("go", "software-engineering", "transactions"),
        verifier_timeout_sec=420.0,
        reward_outcomes=REWARD_OUTCOMES,
        packages=GO.packages,
    )
