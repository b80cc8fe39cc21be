"""config-parser's inputs: random configuration files, and corner cases made for each
documented rule (every bug of the pool shows on one), drawn when the task is generated."""

_SECTIONS = ["server", "database", "cache", "auth", "logging", "paths", "features", "mail"]
_KEYS = (
    "host port timeout retries enabled name level path ratio offset tags motd url user limit debug"
).split()


def _random_value(rng, section, known):
    r = rng.random()
    if r < 0.15:
        return (
            str(rng.randrange(-500, 5000)) if rng.random() < 0.7 else "+" + str(rng.randrange(99))
        )
    if r < 0.25:
        return f"{rng.randrange(-20, 100)}.{rng.randrange(100)}"
    if r < 0.38:
        w = rng.choice(["true", "false", "yes", "no", "on", "off"])
        return rng.choice([w, w.upper(), w.capitalize()])
    if r < 0.52:
        body = rng.choice(
            [
                "a # b",
                "x ; y",
                'say \\"hi\\" # not a comment',
                "tab\\there",
                "C:\\\\new\\\\dir",
                "line\\nbreak",
                "plain",
                "50% off",
                "a,b",
            ]
        )
        return '"' + body + '"'
    if r < 0.64:
        items = [
            rng.choice(["1", "-2", "x", '"p, q"', "yes", "2.5", '"s"'])
            for _ in range(rng.randrange(0, 4))
        ]
        return "[" + ", ".join(items) + "]"
    if r < 0.78 and known:
        sec, key = rng.choice(known)
        ref = "${" + (key if sec == section and rng.random() < 0.6 else sec + "." + key) + "}"
        return rng.choice([ref, "pre-" + ref, ref + "/x"])
    return rng.choice(["alpha", "beta gamma", "/var/lib/app", "x-y-z", "http://h:1/p"])


def random_config(rng, n_sections):
    lines, known = ["# generated configuration", "; another comment"], []
    names = rng.sample(_SECTIONS, n_sections)
    names.append(rng.choice(names))  # a repeated section
    for sec in names:
        lines.append(
            rng.choice(["[{}]", "[ {} ]", "[{}]"]).format(
                sec.upper() if rng.random() < 0.2 else sec
            )
        )
        for key in rng.sample(_KEYS, rng.randrange(2, 7)):
            shown = key.capitalize() if rng.random() < 0.2 else key
            value = _random_value(rng, sec, known)
            r = rng.random()
            if r < 0.15 and not value.startswith(("[", '"')):
                value = value + " \\\n" + " " * rng.randrange(0, 8) + "more " + value
            elif r < 0.3:
                value = value + rng.choice(["  # note", " ; note", "\t# tab note"])
            lines.append(
                "{}{}={}{}".format(shown, rng.choice([" ", ""]), rng.choice([" ", "  "]), value)
            )
            known.append((sec, key))
        lines.append("")
    return "\n".join(lines) + "\n"


def corners(rng) -> list[str]:
    """Configurations made for each documented rule (and every reported bug)."""
    s1, s2, k1, k2 = rng.sample(_SECTIONS, 2) + rng.sample(_KEYS, 2)
    return [
        f'[{s1}]\n{k1} = "v # w"  # c\n{k2} = "q \\" ; r" ; c\n',
        f"[{s1}]\n{k1} = YES\n{k2} = off\n[{s2}]\n{k1} = No\n",
        f"[{s1.upper()}]\n{k1.capitalize()} = 1\n[{s2}]\n{k1} = 2\n",
        f"[{s1}]\n{k1} = 1\n[{s2}]\n{k1} = 2\n[{s1}]\n{k2} = 3\n{k1} = 4\n",
        f"[{s1}]\n{k1} = -7\n{k2} = +3\n",
        f"[{s1}]\n{k1} = one \\\n     two \\\n\tthree\n",
        f"[{s1}]\n{k1} = h1\n{k2} = ${{{k1}}}:1\n[{s2}]\n{k1} = h2\n{k2} = ${{{s1}.{k2}}}\n",
        f'[{s1}]\n{k1} = "C:\\\\new\\\\t\\tz\\q"\n',
        f"[{s1}]\n{k1} = ${{{k2}}}\n{k2} = ${{{k1}}}\n",
        f'[{s1}]\n{k1} = ["p, q", 2, yes]\n{k2} = [ 1 ,  -2 ]\n',
        f"[{s1}]\n{k1} = ${{nope}}\n",
        f"{k1} = 1\n",
        f"[{s1}]\njust text\n",
        "[ ]\n",
    ]
