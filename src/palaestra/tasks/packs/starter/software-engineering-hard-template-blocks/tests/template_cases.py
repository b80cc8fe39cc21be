"""The minitpl cases and their expected results:

1. hand-written templates with expected output (every feature, edge cases);
2. hand-written bad templates with the expected error line;
3. random templates (from the test's fixed seed) generated as trees, printed to text, with the
   expected output computed directly from the tree (no parsing), so the agent's parser and
   renderer are both checked.
"""

import html
import json
import random


CTX = {"name": "Ada <Lovelace> & co", "n": 3, "zero": 0, "flag": True, "off": False,
       "empty": "", "none": None, "words": ["a<b", "c&d", "e"],
       "items": [{"name": "Tea", "qty": 1, "tags": ["hot"]},
                 {"name": "Cups", "qty": 4, "tags": []},
                 {"name": "<Pot>", "qty": 2, "tags": ["big", "blue"]}],
       "user": {"name": "o'Brien \"Bo\"", "admin": False, "profile": {"city": "Cork"}},
       "d": {"items": ["k1", "k2"]}, "obj": {"__ns__": {"attr": "from-attr", "n": 7}},
       "loop": "outer-loop", "x": "outer-x"}

HAND = [
    ("plain {text} } { x }%# \n", "plain {text} } { x }%# \n"),
    ("{{name}}|{{ name }}|{{  name  }}", "Ada &lt;Lovelace&gt; &amp; co|" * 2 + "Ada &lt;Lovelace&gt; &amp; co"),
    ("{{ name|safe }}", "Ada <Lovelace> & co"),
    ("{{ user.name }}", "o&#x27;Brien &quot;Bo&quot;"),
    ("{{ name|upper }} {{ name|lower|safe }} {{ user.profile.city|title }}",
     "ADA &lt;LOVELACE&gt; &amp; CO ada <lovelace> & co Cork"),
    ("{{ words|length }} {{ name|length }} {{ missing|length }} {{ none|length }}", "3 19 0 0"),
    ("{{ words|join(\", \") }}|{{ words|join('')|safe }}|{{ missing|join(\"-\") }}",
     "a&lt;b, c&amp;d, e|a<bc&de|"),
    ("[{{ missing }}][{{ none }}][{{ user.nope.deeper }}][{{ n.real.x }}]", "[][][][]"),
    ("{{ empty|default(\"(none)\") }} {{ zero|default('0!') }} {{ n|default(\"x\") }}",
     "(none) 0! 3"),
    ("{{ missing|default(\"<i>\") }}/{{ missing|default(\"<i>\")|safe }}", "&lt;i&gt;/<i>"),
    ("{{ flag }} {{ off }} {{ n }} {{ zero }}", "True False 3 0"),
    ("{{ d.items|join(\",\") }} {{ obj.attr }} {{ obj.n }}", "k1,k2 from-attr 7"),
    ("{# a comment with {{ stuff }} inside #}after", "after"),
    ("{% if flag %}yes{% endif %}{% if off %}no{% endif %}", "yes"),
    ("{% if off %}a{% elif zero %}b{% elif n %}c{% else %}d{% endif %}", "c"),
    ("{% if off %}a{% elif zero %}b{% else %}d{% endif %}", "d"),
    ("{% if not off %}1{% endif %}{% if not missing %}2{% endif %}{% if not words %}3{% endif %}",
     "12"),
    ("{% if n == 3 %}a{% endif %}{% if n != 3 %}b{% endif %}{% if user.name == \"x\" %}c{% endif %}",
     "a"),
    ("{% if missing == none %}u{% endif %}{% if not n == 4 %}v{% endif %}{% if zero == -0 %}w{% endif %}",
     "uvw"),
    ("{% if 'x' == \"x\" %}lit{% endif %}{% if n != 'n' %}!{% endif %}", "lit!"),
    ("{% for w in words %}{{ loop.index }}:{{ w }}{% if not loop.last %}, {% endif %}{% endfor %}",
     "1:a&lt;b, 2:c&amp;d, 3:e"),
    ("{% for i in items %}{% if loop.first %}[{% endif %}{{ i.name }}x{{ i.qty }}"
     "{% if loop.last %}]{{ loop.length }}{% endif %}{% endfor %}", "[Teax1Cupsx4&lt;Pot&gt;x2]3"),
    ("{% for i in items %}{{ i.name }}({% for t in i.tags %}{{ loop.index }}{{ t }}{% else %}-"
     "{% endfor %}){{ loop.index }} {% endfor %}", "Tea(1hot)1 Cups(-)2 &lt;Pot&gt;(1big2blue)3 "),
    ("{% for x in missing %}no{% else %}empty{% endfor %}|{% for x in none %}no{% else %}e2{% endfor %}",
     "empty|e2"),
    ("{{ x }}{% for x in words %}{{ x|length }}{% endfor %}{{ x }}|{{ loop }}", "outer-x331outer-x|outer-loop"),
    ("{% for w in words %}{% for w in items %}{{ w.qty }}{% endfor %}{{ w|safe }};{% endfor %}",
     "142a<b;142c&d;142e;"),
    ("{% for c in d.items %}{{ c }}{% endfor %}", "k1k2"),
    ("line1\n{% if flag %}\n  inner\n{% endif %}\nend", "line1\n\n  inner\n\nend"),
    ("{%if flag%}a{%else%}b{%endif%}{{n}}", "a3"),
    ("{% if flag %}{% if off %}x{% else %}{% for w in words %}{% if loop.index == 2 %}{{ w }}"
     "{% endif %}{% endfor %}{% endif %}{% endif %}", "c&amp;d"),
    ("{{ name|default(\"x\")|upper|safe }}", "ADA <LOVELACE> & CO"),
    ("{{ items|length }} items", "3 items"),
]

ERRORS = [
    ("{% if x %}", 1),
    ("a\n{% for x in y %}\n{% if z %}\n{% endfor %}", 4),
    ("ok\n{{ x", 2),
    ("{# never closed\n{{ x }}", 1),
    ("a\n\n{% while x %}{% endwhile %}", 3),
    ("{% else %}", 1),
    ("x\n{% if a %}\n{% else %}\n{% elif b %}\n{% endif %}", 4),
    ("{% if a %}{% else %}\n{% else %}{% endif %}", 2),
    ("{% for a in b %}{% elif c %}{% endfor %}", 1),
    ("{{ x|default }}", 1),
    ("\n{{ x|upper(\"a\") }}", 2),
    ("{{ a b }}", 1),
    ("{{ }}", 1),
    ("{% if %}{% endif %}", 1),
    ("{% for x items %}{% endfor %}", 1),
    ("{% for x in %}{% endfor %}", 1),
    ("{% endif %}", 1),
    ("{% if a %}\n{% endfor %}", 2),
    ("a{{ x|nope }}\n{% if %}", 1),
    ("{% if a %}\n{{ b|zz }}", 2),
    ("{% for a in b %}\n{% if c %}\n{% endif %}\n", 1),
    ("{% if a %}{% for b in c %}\n\n{% endif %}", 3),
    ("{% if a ==  %}{% endif %}", 1),
    ("{% if a == b == c %}{% endif %}", 1),
    ("one\ntwo {{ a|join(\",\", \"x\") }}", 2),
    ("{{ a }}\n{{ b }}\n{% bogus %}", 3),
    ("{% if a %}x{% endif %}\n{% endif %}", 2),
    ("{% for x in y %}{% else %}{% else %}{% endfor %}", 1),
]

# ------------------------------------------------------------------ random templates

PATHS = {  # path -> kind, outside any loop
    "name": "str", "user.name": "str", "user.profile.city": "str", "empty": "str",
    "n": "int", "zero": "int", "flag": "bool", "off": "bool", "words": "list", "items": "list",
    "missing": "undef", "user.nope": "undef", "none": "undef",
}
FILTERS = {"str": ["upper", "lower", "title", "length", "default", "safe"],
           "int": ["default", "safe"], "bool": ["default", "safe"],
           "list": ["length", "join", "safe"], "undef": ["upper", "length", "default", "join", "safe"]}
TEXTS = ["Hi ", "\n", " - ", "<b>", "a & b", "{ not a tag }", "}", "% #", "x", "\t"]


def lookup(scopes, path):
    parts = path.split(".")
    for scope in reversed(scopes):
        if parts[0] in scope:
            v = scope[parts[0]]
            break
    else:
        return None
    for p in parts[1:]:
        if isinstance(v, dict) and p in v:
            v = v[p]
        else:
            return None
    return v


def text_of(v):
    return "" if v is None else str(v)


def apply_filter(v, name, arg):
    if name in ("upper", "lower", "title"):
        return getattr(text_of(v), name)()
    if name == "length":
        return 0 if v is None else len(v)
    if name == "default":
        return v if v else arg
    if name == "join":
        return "" if v is None else arg.join(str(x) for x in v)
    return v


def kind_after(kind, name):
    return {"upper": "str", "lower": "str", "title": "str", "length": "int", "join": "str",
            "default": kind if kind != "undef" else "str", "safe": kind}[name]


def gen_body(rng, depth, env):
    """env: {path: kind} of paths available here. Returns a list of nodes."""
    nodes = []
    for _ in range(rng.randint(1, 4)):
        r = rng.random()
        if r < 0.3 or depth == 0:
            nodes.append(("text", rng.choice(TEXTS)))
        elif r < 0.6:
            path = rng.choice(sorted(env))
            kind, filters = env[path], []
            for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
                name = rng.choice(FILTERS[kind])
                arg = rng.choice(["", "-", ", ", "<none>"]) if name in ("default", "join") else None
                filters.append((name, arg))
                kind = kind_after(kind, name)
                if name == "safe":
                    break
            nodes.append(("out", path, filters))
        elif r < 0.68:
            nodes.append(("comment", rng.choice(["note", "{{ x }}", "multi\nline"])))
        elif r < 0.86:
            branches = []
            for _ in range(rng.randint(1, 3)):
                path = rng.choice(sorted(env))
                form = rng.random()
                if form < 0.4:
                    expr = (rng.random() < 0.3, path, None, None)
                else:
                    lit = rng.choice([3, 0, -1, "Tea", "", "e", 1])
                    expr = (rng.random() < 0.3, path, rng.choice(["==", "!="]), lit)
                branches.append((expr, gen_body(rng, depth - 1, env)))
            else_body = gen_body(rng, depth - 1, env) if rng.random() < 0.5 else None
            nodes.append(("if", branches, else_body))
        else:
            seq = rng.choice([p for p, k in sorted(env.items()) if k in ("list", "undef")])
            var = rng.choice(["it", "w", "x", "loop2"])
            inner = {p: k for p, k in env.items() if p.split(".")[0] not in (var, "loop")}
            inner.update({"loop.index": "int", "loop.first": "bool", "loop.last": "bool",
                          "loop.length": "int"})
            if seq.endswith("items"):
                inner.update({var: "undef", f"{var}.name": "str", f"{var}.qty": "int",
                              f"{var}.tags": "list"})
                inner.pop(var)
            elif seq.endswith("tags") or seq == "words":
                inner[var] = "str"
            nodes.append(("for", var, seq, gen_body(rng, depth - 1, inner),
                          gen_body(rng, depth - 1, env) if rng.random() < 0.4 else None))
    return nodes


def ws(rng):
    return rng.choice(["", " ", " ", "  "])


def show(nodes, rng):
    out = []
    for node in nodes:
        kind = node[0]
        if kind == "text":
            out.append(node[1])
        elif kind == "comment":
            out.append("{#" + node[1] + "#}")
        elif kind == "out":
            chain = "".join("|" + name + (f'("{arg}")' if arg is not None and rng.random() < 0.5
                                          else f"('{arg}')" if arg is not None else "")
                            for name, arg in node[2])
            out.append("{{" + ws(rng) + node[1] + chain + ws(rng) + "}}")
        elif kind == "if":
            for i, ((neg, path, op, lit), body) in enumerate(node[1]):
                expr = ("not " if neg else "") + path
                if op:
                    expr += f" {op} " + (json.dumps(lit) if isinstance(lit, str) else str(lit))
                out.append("{%" + ws(rng) + ("if " if i == 0 else "elif ") + expr + ws(rng) + "%}")
                out.append(show(body, rng))
            if node[2] is not None:
                out.append("{%" + ws(rng) + "else" + ws(rng) + "%}" + show(node[2], rng))
            out.append("{%" + ws(rng) + "endif" + ws(rng) + "%}")
        else:
            _, var, seq, body, else_body = node
            out.append("{%" + ws(rng) + f"for {var} in {seq}" + ws(rng) + "%}" + show(body, rng))
            if else_body is not None:
                out.append("{% else %}" + show(else_body, rng))
            out.append("{% endfor %}")
    return "".join(out)


def render(nodes, scopes):
    out = []
    for node in nodes:
        kind = node[0]
        if kind == "text":
            out.append(node[1])
        elif kind == "out":
            v = lookup(scopes, node[1])
            for name, arg in node[2]:
                v = apply_filter(v, name, arg)
            t = text_of(v)
            out.append(t if any(n == "safe" for n, _ in node[2]) else html.escape(t))
        elif kind == "if":
            for (neg, path, op, lit), body in node[1]:
                v = lookup(scopes, path)
                res = bool(v) if op is None else (v == lit if op == "==" else v != lit)
                if res != neg:
                    out.append(render(body, scopes))
                    break
            else:
                if node[2] is not None:
                    out.append(render(node[2], scopes))
        elif kind == "for":
            _, var, seq, body, else_body = node
            items = lookup(scopes, seq) or []
            if not items and else_body is not None:
                out.append(render(else_body, scopes))
            for i, item in enumerate(items):
                scopes.append({var: item, "loop": {"index": i + 1, "first": i == 0,
                                                   "last": i == len(items) - 1,
                                                   "length": len(items)}})
                out.append(render(body, scopes))
                scopes.pop()
    return "".join(out)


RANDOM_CTX = {k: v for k, v in CTX.items() if k not in ("obj", "loop", "x", "d")}


def random_cases():
    rng = random.Random(1234)
    cases = []
    for _ in range(300):
        tree = gen_body(rng, rng.randint(1, 4), dict(PATHS))
        cases.append((show(tree, rng), RANDOM_CTX, {"out": render(tree, [dict(RANDOM_CTX)])}))
    return cases


def all_cases():
    made = [(src, CTX, {"out": want}) for src, want in HAND]
    made += [(src, CTX, {"error": line}) for src, line in ERRORS]
    return made + random_cases()


def cases():
    """The call's input: each case's template and context."""
    return [[src, ctx] for src, ctx, _ in all_cases()]


def expected(made):
    return [want for _, _, want in all_cases()]
