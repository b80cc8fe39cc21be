"""The APP_<SECTION>__<KEY> override cases (hand-written, and random ones from the test's
fixed seed), the reference load_config that gives their expected results (with their types),
and the comparison (the harness's ``function`` comparison): a result equal to the
reference's, or a ConfigError naming the variable the reference rejects."""

import configparser
import random


TRUE, FALSE = {"true", "yes", "on", "1"}, {"false", "no", "off", "0"}


class Bad(Exception):
    pass


def coerce(raw):
    t = raw.strip()
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return raw


def convert(current, raw):
    if isinstance(current, bool):
        w = raw.strip().lower()
        if w in TRUE or w in FALSE:
            return w in TRUE
        raise Bad
    if isinstance(current, int):
        try:
            return int(raw.strip())
        except ValueError:
            raise Bad from None
    if isinstance(current, float):
        try:
            return float(raw)
        except ValueError:
            raise Bad from None
    return raw


def reference(ini, env):
    p = configparser.ConfigParser(interpolation=None)
    p.read_string(ini)
    cfg = {s: {k: coerce(v) for k, v in p[s].items()} for s in p.sections()}
    for name, raw in env.items():
        if not name.startswith("APP_") or "__" not in name[4:]:
            continue
        sp, kp = name[4:].split("__", 1)
        sec = next((s for s in cfg if s.lower() == sp.lower()), None)
        key = next((k for k in cfg[sec] if k.lower() == kp.lower()), None) if sec else None
        if key is None:
            return {"error_for": name}
        try:
            cfg[sec][key] = convert(cfg[sec][key], raw)
        except Bad:
            return {"error_for": name}
    return {"config": {s: {k: [type(v).__name__, v] for k, v in kv.items()}
                       for s, kv in cfg.items()}}


BASE = """[server]
host = 0.0.0.0
port = 8080
timeout = 2.5
debug = false

[Feature_Flags]
new_checkout = true
banner = Try it!

[x]
a__b = 1
"""


def hand_cases():
    E = lambda env, via=False, ini=BASE: {"ini": ini, "env": env, "via_os_environ": via}  # noqa
    return [
        E({}),
        E({"APP_SERVER__PORT": "9090"}),
        E({"APP_SERVER__PORT": " -42 "}),
        E({"APP_SERVER__PORT": "+7"}),
        E({"APP_SERVER__PORT": "5.0"}),
        E({"APP_SERVER__PORT": ""}),
        E({"APP_SERVER__PORT": "yes"}),
        E({"APP_SERVER__TIMEOUT": "5"}),
        E({"APP_SERVER__TIMEOUT": " 0.25"}),
        E({"APP_SERVER__TIMEOUT": "fast"}),
        E({"APP_SERVER__DEBUG": "yes"}),
        E({"APP_SERVER__DEBUG": "ON"}),
        E({"APP_SERVER__DEBUG": " 1 "}),
        E({"APP_SERVER__DEBUG": "0"}),
        E({"APP_SERVER__DEBUG": "Off"}),
        E({"APP_SERVER__DEBUG": "maybe"}),
        E({"APP_SERVER__DEBUG": "2"}),
        E({"APP_SERVER__HOST": "  spaced  "}),
        E({"APP_SERVER__HOST": ""}),
        E({"APP_SERVER__HOST": "123"}),
        E({"APP_FEATURE_FLAGS__NEW_CHECKOUT": "no"}),
        E({"APP_feature_flags__Banner": "Hello=World; x"}),
        E({"APP_Server__Port": "1"}),
        E({"APP_SERVER__MISSING": "1"}),
        E({"APP_NOSECTION__PORT": "1"}),
        E({"APPX_SERVER__PORT": "1", "app_server__port": "2", "APP_SERVER_PORT": "3",
           "MY_APP_SERVER__PORT": "4", "APP_": "5", "PATH": "/usr/bin"}),
        E({"APP_X__A__B": "7"}),
        E({"APP_SERVER__PORT": "1234", "APP_SERVER__DEBUG": "true", "OTHER": "x"}, via=True),
        E({"APP_SERVER__PORT": "oops"}, via=True),
        E({"APP_SERVER__PORT": "1", "APP_SERVER__DEBUG": "true", "APP_SERVER__TIMEOUT": "3",
           "APP_SERVER__HOST": "h"}),
    ]


def random_cases(rng):
    cases = []
    for _ in range(120):
        sections, lines, targets = [], [], []
        for s in range(rng.randint(1, 3)):
            sname = rng.choice(["app", "db", "cache", "Web_Server", "io"]) + str(s)
            lines.append(f"[{sname}]")
            for k in range(rng.randint(1, 4)):
                kname = f"{rng.choice(['size', 'name', 'enabled', 'ratio', 'max_items'])}{k}"
                kind = rng.choice(["int", "float", "bool", "str"])
                value = {"int": str(rng.randint(-99, 99)), "float": f"{rng.uniform(-9, 9):.3f}",
                         "bool": rng.choice(["true", "false", "True"]),
                         "str": rng.choice(["abc", "x y", "on", "yes"])}[kind]
                lines.append(f"{kname} = {value}")
                targets.append((sname, kname, kind))
        env, used = {}, set()
        for _ in range(rng.randint(0, 3)):
            sname, kname, kind = rng.choice(targets)
            if (sname, kname) in used:
                continue  # one variable per setting: several would depend on dict order
            used.add((sname, kname))
            name = "APP_" + rng.choice([str.upper, str.lower, lambda x: x])(sname) + "__" + \
                rng.choice([str.upper, lambda x: x])(kname)
            pool = {"int": ["12", " -3", "4.0", "x"], "float": ["1", "2.50", "-0.1", "nan?"],
                    "bool": ["YES", "off", "1", "nope"], "str": ["  v  ", "", "42"]}[kind]
            if rng.random() < 0.9:
                env[name] = rng.choice(pool[:-1] if rng.random() < 0.85 else pool)
            else:
                env[name + "x"] = "1"
        cases.append({"ini": "\n".join(lines) + "\n", "env": env,
                      "via_os_environ": rng.random() < 0.2})
    return cases


def cases():
    return hand_cases() + random_cases(random.Random(31415))


def expected(made):
    return [reference(case["ini"], case["env"]) for case in made]


def check(ck, label, want, got, options):
    """One check a case."""
    if "error_for" in want:
        ok = isinstance(got, dict) and want["error_for"] in str(got.get("error", "")) \
            and "error" in got
    else:
        ok = got == want
    ck.check(label, ok, "" if ok else f"expected {str(want)[:300]}, got {str(got)[:300]}")
