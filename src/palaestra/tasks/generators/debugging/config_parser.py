"""config-parser: an INI-style configuration parser (sections, typed values, quoted strings,
inline comments, continuation lines, lists, ``${section.key}`` interpolation) that misreads
some files.

Bugs come from a pool of ten: comments inside quotes, boolean words, key case, repeated
sections, signed integers, continuation indentation, the section a nested reference resolves
in, escape sequences, reference cycles and lists with quoted commas. Difficulty knobs: the
number of bugs (2 / 3 / 4), their subtlety and how much the bug reports reveal; the hidden
configurations grow with difficulty. The hidden test parses secret configuration files with
the agent's parser and compares the typed results (or the error) with the correct parser's,
computed when the task is generated.
"""

from __future__ import annotations

import random
import textwrap

from palaestra.tasks.generators import family
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.debugging._config_inputs import corners, random_config
from palaestra.tasks.generators.debugging._kit import (
    CALLS_DRIVER,
    Bug,
    bug_solutions,
    call_tests,
    choose_bugs,
    inject,
    wrong_variants,
)

_PACKAGES = ["confy", "settings", "iniparse", "appconf", "cfgkit"]


def _sources(pkg: str) -> dict[str, str]:
    return {
        f"{pkg}/__init__.py": f'"""{pkg}: INI-style configuration files."""\n\nfrom .parser import ConfigError, load  # noqa: F401\n',
        f"{pkg}/values.py": textwrap.dedent(
            '''\
            """Typed values."""

            import re

            _INT = re.compile(r"[+-]?\\d+")
            _FLOAT = re.compile(r"[+-]?(\\d+\\.\\d*|\\.\\d+)([eE][+-]?\\d+)?")
            TRUE = ("true", "yes", "on")
            FALSE = ("false", "no", "off")
            _ESCAPES = {"n": "\\n", "t": "\\t", '"': '"', "\\\\": "\\\\"}


            def unescape(text):
                """Escapes in quoted strings: \\\\n, \\\\t, \\\\" and \\\\\\\\; any other
                backslash is kept as it is."""
                out, i = [], 0
                while i < len(text):
                    if text[i] == "\\\\" and i + 1 < len(text) and text[i + 1] in _ESCAPES:
                        out.append(_ESCAPES[text[i + 1]])
                        i += 2
                    else:
                        out.append(text[i])
                        i += 1
                return "".join(out)


            def split_items(text):
                """Split a list body on the commas that are not inside double quotes."""
                items, current, quoted, prev = [], [], False, ""
                for ch in text:
                    if ch == '"' and prev != "\\\\":
                        quoted = not quoted
                    if ch == "," and not quoted:
                        items.append("".join(current))
                        current = []
                    else:
                        current.append(ch)
                    prev = ch
                items.append("".join(current))
                return items


            def convert(raw):
                """The typed value of a raw value (comment removed, trimmed):

                "..." -> the string inside, unescaped; [a, b] -> a list of converted items
                ([] is empty); integers (optional sign) -> int; decimals -> float;
                true/yes/on and false/no/off in any case -> bool; anything else -> the text.
                """
                if len(raw) >= 2 and raw[0] == raw[-1] == '"':
                    return unescape(raw[1:-1])
                if raw.startswith("[") and raw.endswith("]"):
                    inner = raw[1:-1].strip()
                    return [convert(item.strip()) for item in split_items(inner)] if inner else []
                if _INT.fullmatch(raw):
                    return int(raw)
                if _FLOAT.fullmatch(raw):
                    return float(raw)
                if raw.lower() in TRUE:
                    return True
                if raw.lower() in FALSE:
                    return False
                return raw
            '''
        ),
        f"{pkg}/parser.py": textwrap.dedent(
            '''\
            """The file format.

                # comment           ; comment too
                [section]           (names and keys are case-insensitive: stored lower-case)
                key = value         # an inline comment needs a blank before it
                long = first part \\\\
                       second part  (a trailing backslash continues the line: one space joins
                                     the parts, the next line's indentation is dropped)
                url = http://${server.host}:${port}   (interpolation: ${key} in the same
                                     section, ${section.key} elsewhere, before typing)

            A section may appear more than once: its keys are merged, the last value of a key
            wins.
            """

            import re

            from .values import convert

            _REF = re.compile(r"\\$\\{([^}]+)\\}")


            class ConfigError(ValueError):
                pass


            def logical_lines(text):
                """(first line number, text) of each logical line, continuations joined."""
                out, pieces, start = [], [], None
                for n, raw in enumerate(text.splitlines(), start=1):
                    part = raw.strip() if pieces else raw.rstrip()
                    if start is None:
                        start = n
                    if part.endswith("\\\\"):
                        pieces.append(part[:-1].rstrip())
                        continue
                    pieces.append(part)
                    out.append((start, " ".join(pieces)))
                    pieces, start = [], None
                if pieces:
                    out.append((start, " ".join(pieces)))
                return out


            def strip_comment(line):
                """Drop a comment: "#" or ";" preceded by a blank (or first on the line) and
                outside double quotes (a backslash-escaped quote does not close a string)."""
                quoted, prev = False, " "
                for i, ch in enumerate(line):
                    if ch == '"' and prev != "\\\\":
                        quoted = not quoted
                    elif ch in "#;" and not quoted and prev.isspace():
                        return line[:i]
                    prev = ch
                return line


            def interpolate(value, section, data, seen):
                """Expand ${key} / ${section.key} references, recursively; a reference to an
                unknown key or a cycle raises ConfigError."""

                def expand(m):
                    name = m.group(1).strip().lower()
                    sec, _, key = name.rpartition(".")
                    sec = sec or section
                    if (sec, key) in seen:
                        raise ConfigError(f"reference cycle through ${{{name}}}")
                    if sec not in data or key not in data[sec]:
                        raise ConfigError(f"unknown reference ${{{name}}}")
                    return interpolate(data[sec][key], sec, data, seen + ((sec, key),))

                return _REF.sub(expand, value)


            def load(text):
                """Parse a configuration: {section: {key: typed value}}."""
                data, section = {}, None
                for n, line in logical_lines(text):
                    line = strip_comment(line).strip()
                    if not line:
                        continue
                    if line.startswith("["):
                        if not line.endswith("]") or not line[1:-1].strip():
                            raise ConfigError(f"line {n}: bad section header")
                        section = line[1:-1].strip().lower()
                        data.setdefault(section, {})
                        continue
                    key, sep, value = line.partition("=")
                    key = key.strip().lower()
                    if not sep or not key:
                        raise ConfigError(f"line {n}: expected key = value")
                    if section is None:
                        raise ConfigError(f"line {n}: key outside a section")
                    data[section][key] = value.strip()
                return {
                    s: {k: convert(interpolate(v, s, data, ((s, k),))) for k, v in keys.items()}
                    for s, keys in data.items()
                }
            '''
        ),
    }


def _bugs(pkg: str) -> list[Bug]:
    v, p = f"{pkg}/values.py", f"{pkg}/parser.py"

    def vt(name: str, text: str, check: str) -> str:
        return f"    def test_{name}(self):\n        c = load({text!r})\n        {check}\n"

    return [
        Bug(
            "comment-in-quotes",
            p,
            (
                (
                    'elif ch in "#;" and not quoted and prev.isspace():',
                    'elif ch in "#;" and prev.isspace():',
                ),
            ),  # fmt: skip
            (
                (
                    'if ch == \'"\' and prev != "\\\\":\n            quoted',
                    "if ch == '\"':\n            quoted",
                ),
            ),  # fmt: skip
            'Quoted values containing " #" are cut short.',
            vt(
                "hash_in_quotes",
                '[s]\nmotd = "tea # coffee"  # drinks\n',
                "self.assertEqual(c['s']['motd'], 'tea # coffee')",
            ),  # fmt: skip
        ),
        Bug(
            "bool-words",
            v,
            (
                (
                    'TRUE = ("true", "yes", "on")\nFALSE = ("false", "no", "off")',
                    'TRUE = ("true",)\nFALSE = ("false",)',
                ),
            ),  # fmt: skip
            (
                ("if raw.lower() in TRUE:", "if raw in TRUE:"),
                ("if raw.lower() in FALSE:", "if raw in FALSE:"),
            ),  # fmt: skip
            "`debug = yes` comes back as the string 'yes'.",
            vt(
                "bool_words",
                "[s]\na = yes\nb = Off\n",
                "self.assertEqual((c['s']['a'], c['s']['b']), (True, False))",
            ),  # fmt: skip
        ),
        Bug(
            "key-case",
            p,
            (("key = key.strip().lower()", "key = key.strip()"),),
            (("section = line[1:-1].strip().lower()", "section = line[1:-1].strip()"),),
            "`Port = 80` cannot be read back as `port`.",
            vt("key_case", "[Net]\nPort = 80\n", "self.assertEqual(c['net']['port'], 80)"),
        ),
        Bug(
            "repeated-section",
            p,
            (("data.setdefault(section, {})", "data[section] = {}"),),
            (
                (
                    "data[section][key] = value.strip()",
                    "data[section].setdefault(key, value.strip())",
                ),
            ),  # fmt: skip
            "A section that appears twice loses the keys of its first part.",
            vt(
                "repeated_section",
                "[a]\nx = 1\n[b]\ny = 2\n[a]\nz = 3\n",
                "self.assertEqual(c['a'], {'x': 1, 'z': 3})",
            ),  # fmt: skip
        ),
        Bug(
            "signed-numbers",
            v,
            (('_INT = re.compile(r"[+-]?\\d+")', '_INT = re.compile(r"\\d+")'),),
            (('_INT = re.compile(r"[+-]?\\d+")', '_INT = re.compile(r"-?\\d+")'),),
            "Negative offsets (`offset = -5`) are read as text.",
            vt("signed", "[s]\noffset = -5\n", "self.assertEqual(c['s']['offset'], -5)"),
            subtle=True,
        ),
        Bug(
            "continuation-indent",
            p,
            (("part = raw.strip() if pieces else raw.rstrip()", "part = raw.rstrip()"),),
            (
                (
                    'out.append((start, " ".join(pieces)))\n        pieces',
                    'out.append((start, "".join(pieces)))\n        pieces',
                ),
            ),  # fmt: skip
            "Values continued on an indented line get runs of spaces in the middle.",
            vt(
                "continuation",
                "[s]\nmsg = hello \\\n      world\n",
                "self.assertEqual(c['s']['msg'], 'hello world')",
            ),  # fmt: skip
            subtle=True,
        ),
        Bug(
            "nested-reference-section",
            p,
            (
                (
                    "interpolate(data[sec][key], sec, data,",
                    "interpolate(data[sec][key], section, data,",
                ),
            ),  # fmt: skip
            (
                (
                    "return interpolate(data[sec][key], sec, data, seen + ((sec, key),))",
                    "return data[sec][key]",
                ),
            ),  # fmt: skip
            "A reference to a key that itself uses ${...} expands to the wrong value.",
            vt(
                "nested_reference",
                "[db]\nhost = h1\nurl = ${host}:5432\n[app]\nhost = h2\ndsn = ${db.url}\n",  # fmt: skip
                "self.assertEqual(c['app']['dsn'], 'h1:5432')",
            ),  # fmt: skip
            subtle=True,
        ),
        Bug(
            "escapes",
            v,
            (
                (
                    "    out, i = [], 0\n    while i < len(text):",
                    '    return text.replace("\\\\n", "\\n").replace("\\\\t", "\\t").replace(\'\\\\"\', \'"\').replace("\\\\\\\\", "\\\\")\n    out, i = [], 0\n    while i < len(text):',
                ),  # fmt: skip
            ),
            (
                (
                    "out.append(text[i])\n            i += 1",
                    'if text[i] != "\\\\":\n                out.append(text[i])\n            i += 1',
                ),
            ),  # fmt: skip
            "Windows paths with `\\\\new` in them come out with line breaks.",
            vt(
                "escapes",
                '[s]\npath = "C:\\\\new\\tmp"\n',
                "self.assertEqual(c['s']['path'], 'C:\\\\new\\tmp')",
            ),  # fmt: skip
            subtle=True,
        ),
        Bug(
            "reference-cycle",
            p,
            (("if (sec, key) in seen:", "if False:"),),
            (),
            "A file where two keys refer to each other crashes with RecursionError instead of "
            "a ConfigError.",
            "    def test_cycle(self):\n        with self.assertRaises(ConfigError):\n"
            "            load('[s]\\na = ${b}\\nb = ${a}\\n')\n",
            subtle=True,
        ),
        Bug(
            "list-quoted-commas",
            v,
            (("for item in split_items(inner)]", 'for item in inner.split(",")]'),),
            (
                (
                    "[convert(item.strip()) for item in split_items(inner)]",
                    "[convert(item) for item in split_items(inner)]",
                ),
            ),  # fmt: skip
            'Lists with quoted items containing commas (`["a, b", c]`) split in the wrong places.',
            vt(
                "list_quotes",
                '[s]\nl = ["a, b", 2]\n',
                "self.assertEqual(c['s']['l'], ['a, b', 2])",
            ),
        ),
    ]


@family(
    "config-parser",
    category="debugging",
    summary="INI-style config parser (types, quotes, continuations, interpolation) with 2-4 bugs",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    pkg = rng.choice(_PACKAGES)
    correct = _sources(pkg)
    n_obvious, n_subtle = {"easy": (2, 0), "medium": (2, 1), "hard": (1, 3)}[spec.tier]
    bugs = choose_bugs(rng, _bugs(pkg), n_obvious, n_subtle)
    shown_n = {"easy": len(bugs), "medium": len(bugs) - 1, "hard": 2}[spec.tier]
    shown = sorted(rng.sample(bugs, shown_n), key=bugs.index)
    workspace = inject(correct, bugs)
    workspace["BUGS.md"] = "# Reported problems\n\n" + "\n".join(f"- {b.symptom}" for b in shown)
    workspace["tests/test_parser.py"] = (
        f"import unittest\n\nfrom {pkg} import ConfigError, load\n\n\n"
        "class ParserTests(unittest.TestCase):\n"
        + "\n".join(b.visible_test for b in shown)
        + '\n\nif __name__ == "__main__":\n    unittest.main()\n'
    )
    workspace["examples/service.ini"] = random_config(rng, 3)
    secret = rng.randrange(2**31)
    instruction = textwrap.dedent(
        f"""\
        # Fix the configuration parser

        `/app/{pkg}/` parses our INI-style configuration files: `from {pkg} import load;
        load(text)` returns `{{section: {{key: typed value}}}}` or raises `ConfigError`. The
        format is documented in the docstrings of `{pkg}/parser.py` and `{pkg}/values.py`
        (an example file is in `/app/examples/`). Several services read their settings
        wrong: see `/app/BUGS.md`; `cd /app && python3 -m unittest discover -s tests` fails.

        Fix the parser so it follows its documented format for every file{
            "" if spec.tier == "easy" else " (the bug list may not be complete)"
        }. Keep the
        package layout and the names `load` and `ConfigError`. Only the standard library is
        available.
        """
    )
    wrongs = wrong_variants(correct, bugs, rng)
    return GeneratedTask(
        instruction=instruction,
        workspace=workspace,
        tests=_tests(correct, pkg, secret, spec.iscale(20, 60), spec.iscale(3, 8)),
        **bug_solutions(correct, workspace, wrongs, note="the correct parser"),
        tags=("python", "debugging", "parsing", "config"),
    )


def _tests(correct: dict[str, str], pkg: str, secret: int, n_configs: int, n_sections: int):
    """The corner cases as one group, then each random configuration: ``load`` of each."""
    rng = random.Random(secret)
    fixed = corners(rng)
    configs = [random_config(rng, n_sections) for _ in range(n_configs)]
    load = pkg + ".parser"
    cases = [(f"corner cases ({len(fixed)} cases)", [[load, "load", [t]] for t in fixed])]
    cases += [(f"random configuration {k}", [[load, "load", [t]]]) for k, t in enumerate(configs)]
    return call_tests(correct, CALLS_DRIVER, cases)
