"""model-validation: add input validation with precise, complete error reports to data models.

The workspace is a package ``<pkg>/models.py`` of dataclasses whose ``from_dict`` trusts its
input. The instruction gives the schema (types, required/optional, bounds, lengths, patterns,
choices; randomised per task) and the error format; ``from_dict`` must collect **every** error as
``[path, message]`` in a defined order. The checker imports nothing from /app: it runs ``from_dict``
as ``nobody`` on inputs drawn from the task's secret (valid ones, boundary values, booleans posing
as integers, patterns with junk around them, nested and multiple errors...) and compares the
errors, or ``to_dict()`` of the result, with a private reference package.

Difficulty knobs: easy is a flat model; medium adds a list of sub-models (indexed paths), string
patterns and lengths, and unknown-field errors; hard adds an optional nested object, optional
fields given as ``null`` and a cross-field rule checked only when both fields are valid. The
schema's bounds, choices and names vary per task.
"""

from __future__ import annotations

import random
import textwrap

from palaestra.tasks import outcomes
from palaestra.tasks.generators import family, solve_sh_writing
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

_PKGS = ["orders", "bookings", "eventdesk", "shipping"]
_EMAIL = r"[a-z0-9.]+@[a-z0-9]+\.[a-z]{2,}"


def _schema(rng, tier):
    """{"root": name, "models": {name: [[field, type, opts], ...]}, "cross": {name: [[a, b]]}}."""
    if rng.random() < 0.5:
        root, sub, obj = "Order", "LineItem", "Address"
        status = rng.sample(["pending", "paid", "shipped", "cancelled", "held"], 4)
        fields = [
            ["customer", "str", {"min_len": 2, "max_len": rng.choice([20, 30, 40])}],
            ["email", "str", {"pattern": _EMAIL}],
            ["status", "enum", {"choices": status}],
            ["priority", "int", {"min": 1, "max": rng.choice([3, 5, 9])}],
            ["discount", "number", {"min": 0, "max": rng.choice([50, 100, 500])}],
            ["express", "bool", {}],
        ]
        sub_fields = [
            ["sku", "str", {"pattern": r"[A-Z]{3}-[0-9]{4}"}],
            ["quantity", "int", {"min": 1, "max": rng.choice([10, 99, 500])}],
            ["unit_price", "number", {"min": 0}],
        ]
        obj_fields = [["street", "str", {"min_len": 3}], ["city", "str", {"min_len": 1}],
                      ["postcode", "str", {"pattern": r"[0-9]{5}"}]]  # fmt: skip
        list_name, obj_name, extra = "items", "address", ["budget", "number", {"min": 0}]
        cross = ["discount", "budget"]
    else:
        root, sub, obj = "Event", "Ticket", "Venue"
        kinds = rng.sample(["talk", "workshop", "meetup", "panel", "social"], 4)
        fields = [
            ["title", "str", {"min_len": 3, "max_len": rng.choice([40, 60, 80])}],
            ["organizer", "str", {"pattern": _EMAIL}],
            ["kind", "enum", {"choices": kinds}],
            ["capacity", "int", {"min": 1, "max": rng.choice([100, 250, 1000])}],
            ["fee", "number", {"min": 0, "max": rng.choice([20, 75, 300])}],
            ["public", "bool", {}],
        ]
        sub_fields = [
            ["code", "str", {"pattern": r"T[0-9]{3}"}],
            ["seats", "int", {"min": 1, "max": rng.choice([4, 8, 12])}],
            ["price", "number", {"min": 0}],
        ]
        obj_fields = [["name", "str", {"min_len": 2}], ["city", "str", {"min_len": 1}],
                      ["zip", "str", {"pattern": r"[0-9]{4,5}"}]]  # fmt: skip
        list_name, obj_name, extra = "tickets", "venue", ["reserved", "int", {"min": 0}]
        cross = ["reserved", "capacity"]
    rng.shuffle(fields)
    models = {root: fields}
    if tier == "easy":
        for f in fields:
            f[2].pop("pattern", None)
    else:
        fields.append([list_name, "list:" + sub, {"min_items": 1}])
        models[sub] = sub_fields
    out = {"root": root, "models": models, "cross": {}, "strict": tier != "easy"}
    if tier == "hard":
        fields.append(extra)
        fields.append([obj_name, "obj:" + obj, {"optional": True}])
        fields.append(["note", "str", {"optional": True, "max_len": rng.choice([10, 30])}])
        models[obj] = obj_fields
        out["cross"] = {root: [cross]}
    return out


# The reference validator (generic over SCHEMA), shared by the solution and the checker.
_VALIDATOR = r'''
import re


class ValidationError(ValueError):
    """Every problem found in the input, as ``[path, message]`` pairs in a fixed order."""

    def __init__(self, errors):
        self.errors = [list(e) for e in errors]
        super().__init__("; ".join(f"{p}: {m}" for p, m in self.errors))


def _type_error(value, typ):
    if typ in ("str", "enum"):
        return None if isinstance(value, str) else "expected string"
    if typ == "int":
        return None if isinstance(value, int) and not isinstance(value, bool) else "expected integer"
    if typ == "number":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return None if ok else "expected number"
    if typ == "bool":
        return None if isinstance(value, bool) else "expected boolean"
    if typ.startswith("list:"):
        return None if isinstance(value, list) else "expected list"
    return None if isinstance(value, dict) else "expected object"


def _rule_error(value, opts):
    if "min" in opts and value < opts["min"]:
        return f"must be >= {opts['min']}"
    if "max" in opts and value > opts["max"]:
        return f"must be <= {opts['max']}"
    if "min_len" in opts and len(value) < opts["min_len"]:
        return f"must be at least {opts['min_len']} characters"
    if "max_len" in opts and len(value) > opts["max_len"]:
        return f"must be at most {opts['max_len']} characters"
    if "pattern" in opts and not re.fullmatch(opts["pattern"], value):
        return f"must match {opts['pattern']}"
    if "choices" in opts and value not in opts["choices"]:
        return "must be one of: " + ", ".join(opts["choices"])
    if "min_items" in opts and len(value) < opts["min_items"]:
        return f"must have at least {opts['min_items']} items"
    return None


def _check(model, data, path, errors):
    if not isinstance(data, dict):
        errors.append([path, "expected object"])
        return None
    out, valid = {}, set()
    for name, typ, opts in SCHEMA["models"][model]:
        p = f"{path}.{name}" if path else name
        value = data.get(name)
        if value is None:
            if opts.get("optional"):
                out[name] = None
            else:
                errors.append([p, "required"])
            continue
        msg = _type_error(value, typ) or _rule_error(value, opts)
        if msg:
            errors.append([p, msg])
            continue
        if typ.startswith("list:"):
            out[name] = [_check(typ[5:], item, f"{p}[{i}]", errors) for i, item in enumerate(value)]
        elif typ.startswith("obj:"):
            out[name] = _check(typ[4:], value, p, errors)
        else:
            out[name] = value
            valid.add(name)
    for a, b in SCHEMA["cross"].get(model, []):
        if a in valid and b in valid and not out[a] <= out[b]:
            errors.append([f"{path}.{a}" if path else a, f"must be <= {b}"])
    if SCHEMA["strict"]:
        known = {f[0] for f in SCHEMA["models"][model]}
        for key in sorted(k for k in data if k not in known):
            errors.append([f"{path}.{key}" if path else key, "unknown field"])
    return out


def validate(data):
    """The validated plain data, or ValidationError listing every problem."""
    errors = []
    out = _check(SCHEMA["root"], data, "", errors)
    if errors:
        raise ValidationError(errors)
    return out
'''


def _models_source(schema: dict, validated: bool) -> str:
    """models.py: the dataclasses; with ``validated``, the reference (schema + validator)."""
    lines = ['"""The data models. Build them from plain data with ``Root.from_dict(data)``."""']
    lines += ["from dataclasses import asdict, dataclass", "from typing import Optional", ""]
    if validated:
        lines += [f"SCHEMA = {schema!r}", _VALIDATOR]
    order = [m for m in schema["models"] if m != schema["root"]] + [schema["root"]]
    pytypes = {"str": "str", "enum": "str", "int": "int", "number": "float", "bool": "bool"}
    for model in order:
        lines += ["", "@dataclass", f"class {model}:"]
        args = []
        for name, typ, opts in schema["models"][model]:
            if typ.startswith("list:"):
                ann, conv = "list", f'[{typ[5:]}.from_dict(x) for x in data["{name}"]]'
            elif typ.startswith("obj:"):
                ann = f"Optional[{typ[4:]}]"
                conv = f'{typ[4:]}.from_dict(data["{name}"]) if data.get("{name}") is not None else None'
            else:
                ann = pytypes[typ]
                conv = f'data.get("{name}")' if opts.get("optional") else f'data["{name}"]'
            if opts.get("optional"):
                ann = ann if ann.startswith("Optional") else f"Optional[{ann}]"
                lines.append(f"    {name}: {ann} = None")
            else:
                lines.append(f"    {name}: {ann}")
            args.append(f"{name}={conv}")
        lines += ["", "    @classmethod", "    def from_dict(cls, data):"]
        if validated and model == schema["root"]:
            lines.append("        data = validate(data)")
        lines.append("        return cls(")
        lines += [f"            {a}," for a in args]
        lines += ["        )", "", "    def to_dict(self):", "        return asdict(self)", ""]
    return "\n".join(lines).rstrip() + "\n"


def _describe(schema: dict) -> str:
    out = []
    for model, fields in schema["models"].items():
        out += [f"`{model}`:", "", "| field | type | rules |", "| --- | --- | --- |"]
        for name, typ, opts in fields:
            shown = {"str": "string", "enum": "string", "int": "integer", "number": "number",
                     "bool": "boolean"}.get(typ) or (f"list of `{typ[5:]}`" if typ.startswith("list:") else f"`{typ[4:]}` object")  # fmt: skip
            rules = ["optional" if opts.get("optional") else "required"]
            if "min" in opts:
                rules.append(f">= {opts['min']}")
            if "max" in opts:
                rules.append(f"<= {opts['max']}")
            if "min_len" in opts:
                rules.append(f"at least {opts['min_len']} characters")
            if "max_len" in opts:
                rules.append(f"at most {opts['max_len']} characters")
            if "pattern" in opts:
                rules.append(f"matches `{opts['pattern']}`")
            if "choices" in opts:
                rules.append("one of " + ", ".join(f"`{c}`" for c in opts["choices"]))
            if "min_items" in opts:
                rules.append(f"at least {opts['min_items']} items")
            out.append(f"| `{name}` | {shown} | {'; '.join(rules)} |")
        out.append("")
    for model, rules in schema["cross"].items():
        for a, b in rules:
            out.append(f"Cross-field rule on `{model}`: `{a}` must be <= `{b}`.")
    return "\n".join(out).rstrip()


def _inputs(rng, schema, count):
    """Inputs for from_dict: valid documents and mutated ones (one or several problems)."""
    models = schema["models"]

    def valid(model):
        doc = {}
        for name, typ, opts in models[model]:
            if opts.get("optional") and rng.random() < 0.3:
                if rng.random() < 0.5:
                    doc[name] = None
                continue
            doc[name] = value(typ, opts)
        return doc

    def value(typ, opts):
        if typ.startswith("list:"):
            return [valid(typ[5:]) for _ in range(rng.randrange(1, 4))]
        if typ.startswith("obj:"):
            return valid(typ[4:])
        if typ == "enum":
            return rng.choice(opts["choices"])
        if typ == "bool":
            return rng.random() < 0.5
        if "pattern" in opts:
            p = opts["pattern"]
            if p.startswith("[a-z0-9.]"):
                return "%s.%d@%s.%s" % (
                    rng.choice(["ann", "bo", "kim"]),
                    rng.randrange(99),
                    rng.choice(["mail", "corp"]),
                    rng.choice(["io", "com"]),
                )
            if p.startswith("[A-Z]"):
                return "%s-%04d" % (
                    "".join(rng.choice("ABCXYZ") for _ in range(3)),
                    rng.randrange(10000),
                )
            if p.startswith("T"):
                return "T%03d" % rng.randrange(1000)
            return "%05d" % rng.randrange(100000)
        if typ == "str":
            lo, hi = opts.get("min_len", 1), opts.get("max_len", 12)
            return "".join(
                rng.choice("abcdef xyz") for _ in range(rng.randrange(lo, min(hi, lo + 10) + 1))
            )
        lo, hi = opts.get("min", 0), opts.get("max", 1000)
        if typ == "int":
            return rng.randrange(lo, hi + 1)
        return rng.choice([lo, hi, round(rng.uniform(lo, hi), 2), int(rng.uniform(lo, hi))])

    def bad(typ, opts, current):
        options = [None, "required"]
        if typ in ("int", "number"):
            options += [str(current), True]
            if "min" in opts:
                options.append(opts["min"] - rng.choice([1, 0.5]))
            if "max" in opts:
                options.append(opts["max"] + 1)
            if typ == "int":
                options.append(float(opts.get("min", 0)) + 0.5)
        elif typ in ("str", "enum"):
            options += [rng.randrange(100), ["x"]]
            if "min_len" in opts:
                options.append("x" * (opts["min_len"] - 1))
            if "max_len" in opts:
                options.append("y" * (opts["max_len"] + 1))
            if "pattern" in opts:
                options += ["junk " + value(typ, opts) + " junk", value(typ, opts).lower() + "!"]
            if "choices" in opts:
                options += [opts["choices"][0].upper(), "other"]
        elif typ == "bool":
            options += [1, "true"]
        elif typ.startswith("list:"):
            options += [[], {"0": 1}, "items"]
        else:
            options += [[1], "street"]
        return rng.choice(options)

    def mutate(doc, model, n):
        fields = models[model]
        for _ in range(n):
            name, typ, opts = rng.choice(fields)
            roll = rng.random()
            if (
                typ.startswith("list:")
                and isinstance(doc.get(name), list)
                and doc[name]
                and roll < 0.6
            ):
                i = rng.randrange(len(doc[name]))
                mutate(doc[name][i], typ[5:], 1)
            elif typ.startswith("obj:") and isinstance(doc.get(name), dict) and roll < 0.6:
                mutate(doc[name], typ[4:], 1)
            elif roll < 0.1 and schema["strict"]:
                doc["x_" + rng.choice(["extra", "id", "colour"])] = 1
            else:
                b = bad(typ, opts, doc.get(name))
                if b == "required":
                    doc.pop(name, None)
                else:
                    doc[name] = b
        return doc

    root = schema["root"]
    docs = [valid(root) for _ in range(2)]
    for _ in range(count):
        docs.append(mutate(valid(root), root, rng.randrange(1, 5)))
    # probes every task holds: boundaries, bool-for-int, junk around a pattern, several errors
    fields = models[root]
    for name, typ, opts in fields:
        if typ in ("int", "number") and "min" in opts:
            d = valid(root)
            d[name] = opts["min"]
            docs.append(d)
            d = valid(root)
            d[name] = opts.get("max", opts["min"] + 5)
            docs.append(d)
        if typ == "int":
            docs.append(dict(valid(root), **{name: True}))
        if "pattern" in opts:
            docs.append(dict(valid(root), **{name: "<" + value(typ, opts) + ">"}))
    d = valid(root)
    for field in fields[:3]:
        d.pop(field[0])
    docs.append(d)
    for name, typ, _ in fields:
        if typ.startswith("list:"):
            d = valid(root)
            d[name] = [valid(typ[5:]), mutate(valid(typ[5:]), typ[5:], 2), valid(typ[5:])]
            docs.append(d)
        if typ.startswith("obj:"):
            d = valid(root)
            d[name] = {k: v for k, v in valid(typ[4:]).items() if k != models[typ[4:]][0][0]}
            docs.append(d)
            docs.append(dict(valid(root), **{name: None, "note": None}))
    if schema["strict"]:
        docs.append(dict(valid(root), zzz=1, aaa=2))
    for a, b in schema["cross"].get(root, []):
        d = valid(root)
        hi = dict(fields_by_name(fields))
        d[b] = hi[b][2].get("min", 0) + 1
        d[a] = d[b] + 1
        if "max" in hi[a][2] and d[a] > hi[a][2]["max"]:
            d[b], d[a] = 1, 2
        docs.append(d)
        docs.append(dict(d, **{b: "lots"}))  # b invalid: the cross rule is not checked
        low_a, low_b = hi[a][2].get("min", 0), hi[b][2].get("min", 0)
        docs.append(dict(d, **{b: low_b - 1, a: low_a + 1}))  # b out of range, a > b
    docs.append([1, 2])
    return docs


def fields_by_name(fields):
    return [(f[0], f) for f in fields]


_RUNNER = """
from PKG.models import ROOT, ValidationError

out = []
for doc in INPUT:
    try:
        out.append(["ok", ROOT.from_dict(doc).to_dict()])
    except ValidationError as e:
        out.append(["errors", [list(x) for x in e.errors], str(e)])
    except Exception as e:
        out.append(["crash", type(e).__name__])
emit(out)
"""


@family(
    "model-validation",
    category="software-engineering",
    summary="Add complete, precisely worded input validation to dataclass models (from_dict)",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    tier = spec.tier
    pkg = rng.choice(_PKGS)
    schema = _schema(rng, tier)
    root = schema["root"]
    secret = rng.randrange(2**31)
    count = spec.iscale(8, 30)

    rules = [
        "A missing field, or one that is `null`/`None`, is `required` — unless the field is "
        "optional, in which case it becomes `None` and nothing else is checked.",
        "Types: `expected string`, `expected integer` (a bool is not an integer; neither is "
        "`2.0`), `expected number` (int or float, not bool), `expected boolean`, `expected "
        "list`, `expected object`.",
        "Then the field's rules, the first one broken giving the message: `must be >= N`, `must be "
        "<= N`, `must be at least N characters`, `must be at most N characters`, `must match "
        "PATTERN` (the whole value must match: `re.fullmatch`), `must be one of: a, b, c` (in the "
        "order listed), `must have at least N items`. N and PATTERN are written as in the table.",
        "One error at most per field; the errors are listed in the order of the fields in the "
        "table"
        + (
            ", errors inside a list item or nested object at the place of that field"
            if tier != "easy"
            else ""
        )
        + ".",
    ]
    if tier != "easy":
        rules.append(
            "Paths: the field name at the top level; `items[2].quantity` style inside lists "
            "(0-based) and `address.city` inside objects. A list item that is not an object is "
            "`expected object` at `items[2]`."
        )
        rules.append(
            "Keys that are not in the table are errors too: `unknown field`, one per key, after "
            "the errors of the fields of that object, in sorted order of the key."
        )
    if tier == "hard":
        rules.append(
            "The cross-field rule is checked only when both fields are present and valid; its "
            "error (`must be <= OTHER`, at the path of the first field) comes after the field "
            "errors of that object and before its unknown fields."
        )
    instruction = textwrap.dedent(
        """\
        # Validate `{root}` input

        `/app/{pkg}/models.py` builds our dataclasses from plain JSON-like data with
        `{root}.from_dict(data)`, trusting whatever it gets. Make `from_dict` validate its
        input against this schema:

        {schema}

        On bad input raise `{pkg}.models.ValidationError` (define it; a subclass of
        `ValueError`) with `.errors`: a list of **every** problem as `[path, message]` pairs,
        and `str(error)` being `"; ".join(f"{{path}}: {{message}}")` over them. A top-level
        value that is not a dict gives the single error `["", "expected object"]`.

        {rules}

        Valid input builds the objects as today (`to_dict()` must give back the validated data,
        optional fields `None` when absent). Only the standard library is available; the
        existing tests in `/app/tests/` must still pass.
        """
    ).format(
        root=root,
        pkg=pkg,
        schema=_describe(schema),
        rules="\n".join(textwrap.fill("- " + r, 90, subsequent_indent="  ") for r in rules),
    )
    workspace = {
        f"{pkg}/__init__.py": f'"""{pkg}: data models."""\n',
        f"{pkg}/models.py": _models_source(schema, validated=False),
        "tests/test_models.py": _visible_tests(pkg, root, rng, schema),
    }
    right = _models_source(schema, validated=True)
    wrong = {
        # stops at the first problem
        "first-error-only": right.replace(
            "        raise ValidationError(errors)", "        raise ValidationError(errors[:1])"
        ),
        # True passes as an integer
        "bool-is-int": right.replace(
            'return None if isinstance(value, int) and not isinstance(value, bool) else "expected integer"',
            'return None if isinstance(value, int) else "expected integer"',
        ),
        # bounds treated as exclusive
        "exclusive-bounds": right.replace(
            'if "min" in opts and value < opts["min"]:',
            'if "min" in opts and value <= opts["min"]:',
        ),
        # float 2.0 accepted for integers; ints rejected for numbers
        "number-types-swapped": right.replace(
            "ok = isinstance(value, (int, float)) and not isinstance(value, bool)",
            "ok = isinstance(value, float)",
        ),
    }
    if tier != "easy":
        wrong["search-not-fullmatch"] = right.replace(
            'not re.fullmatch(opts["pattern"], value)', 'not re.search(opts["pattern"], value)'
        )
        wrong["ignores-unknown-fields"] = right.replace(
            '    if SCHEMA["strict"]:\n        known', "    if False:\n        known"
        )
        wrong["paths-without-index"] = right.replace('f"{p}[{i}]"', "p")
    if tier == "hard":
        # compares the raw values even when one of them is invalid
        wrong["cross-rule-always"] = right.replace(
            "        if a in valid and b in valid and not out[a] <= out[b]:",
            "        num = (int, float)\n"
            "        if isinstance(data.get(a), num) and isinstance(data.get(b), num) and not data[a] <= data[b]:",
        )
        wrong["null-optional-is-required"] = right.replace(
            '        value = data.get(name)\n        if value is None:\n            if opts.get("optional"):',
            '        value = data.get(name)\n        if value is None:\n            if opts.get("optional") and name not in data:',
        )
    for name, text in wrong.items():
        assert text != right, name
    return GeneratedTask(
        instruction=instruction,
        workspace=workspace,
        tests=_tests(pkg, schema, secret, count),
        solution={
            "solve.sh": solve_sh_writing(
                {f"{pkg}/models.py": right}, note="schema-driven validator"
            )
        },
        wrong_solutions={
            n: {"solve.sh": solve_sh_writing({f"{pkg}/models.py": t}, note=f"wrong: {n}")}
            for n, t in wrong.items()
        },
        tags=("python", "feature", "validation"),
        reward_outcomes=outcomes.GRADED + outcomes.ASSERTIONS,
        verifier_timeout_sec=240.0,
    )


def _visible_tests(pkg: str, root: str, rng, schema: dict) -> str:
    return textwrap.dedent(
        f'''\
        """The package's own tests: `cd /app && python3 -m unittest discover -s tests`."""
        import unittest

        from {pkg}.models import {root}

        DOC = {_inputs(rng, schema, 0)[0]!r}


        class ModelTests(unittest.TestCase):
            def test_round_trip(self):
                self.assertEqual({root}.from_dict(DOC).to_dict()["{schema["models"][root][0][0]}"],
                                 DOC["{schema["models"][root][0][0]}"])


        if __name__ == "__main__":
            unittest.main()
        '''
    )


def _tests(pkg: str, schema: dict, secret: int, count: int) -> dict:
    """Inputs drawn from the task's secret, the reference package's answers fixed now; the
    checker runs from_dict of the agent's package on them as nobody, in a copy of /app."""
    docs = _inputs(random.Random(secret), schema, count)
    code = _RUNNER.replace("PKG", pkg).replace("ROOT", schema["root"])
    reference = {f"{pkg}/__init__.py": "", f"{pkg}/models.py": _models_source(schema, True)}
    wants = hs.emitted(reference, code, docs)
    cases = [
        hs.Case(f"input {i}: {str(doc)[:150]}", want=want)
        for i, (doc, want) in enumerate(zip(docs, wants, strict=True))
    ]
    return hs.tests(
        answer=hs.python_calls(hs.python_call(code, docs), compile=[f"/app/{pkg}"]),
        cases=cases,
        compare=hs.compare("equal"),
        limits=hs.limits(timeout=60, cpu=10),
        kind="assert",
        timeout=200,
    )
