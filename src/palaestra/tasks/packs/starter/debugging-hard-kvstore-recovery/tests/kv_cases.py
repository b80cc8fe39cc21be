"""The kvstore scenarios (from the test's fixed seed): random operation scripts (puts and
deletes with Unicode keys and values, restarts, compactions, torn writes appended to the log,
pre-existing log files), and what a correct store shows, each script replayed on a plain
dict."""

import random
import struct
import zlib

SEED = 2718


KEYS = ["a", "user:1", "user:2", "café", "Zoë", "渡辺", "😀-session", "", "line\nbreak", "ключ",
        "naïve", "x" * 300, "tab\tkey", "ß", "k:ü:1"]


def encode(op, key, value=""):
    kb, vb = key.encode(), value.encode()
    return struct.pack(">cIII", op, len(kb), len(vb), zlib.crc32(op + kb + vb)) + kb + vb


def rand_text(rng):
    r = rng.random()
    if r < 0.1:
        return ""
    if r < 0.5:
        return "".join(rng.choice("abcdefghij0123456789 ") for _ in range(rng.randint(1, 20)))
    alphabet = "aéöü漢字かな😀🎉ñçØ€\n\t\"'\\ "
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))


def make_script(rng, n):
    keys = KEYS + [f"key{i}" for i in range(20)]
    script, model = [], {}
    if n % 3 == 0:  # an existing log file written in the documented format
        data = b""
        for _ in range(rng.randint(1, 15)):
            k = rng.choice(keys)
            if rng.random() < 0.25:
                data += encode(b"D", k)
                model.pop(k, None)
            else:
                v = rand_text(rng)
                data += encode(b"P", k, v)
                model[k] = v
        script.append(["file", data.hex()])
    script.append(["open"])
    expected = []
    for _ in range(rng.randint(60, 200)):
        r = rng.random()
        k = rng.choice(keys)
        if r < 0.45:
            v = rand_text(rng)
            script.append(["put", k, v])
            model[k] = v
        elif r < 0.62:
            script.append(["del", k])
            expected.append(["del", k in model])
            model.pop(k, None)
        elif r < 0.72:
            script.append(["get", k])
            expected.append(["get", model.get(k, "<default>"), k in model])
        elif r < 0.8:
            script.append(["reopen"])
        elif r < 0.86:
            script.append(["compact"])
        elif r < 0.92:
            full = encode(rng.choice([b"P", b"D"]), rng.choice(keys), rand_text(rng) + "tail")
            if rng.random() < 0.7:
                torn = full[:rng.randint(1, len(full) - 1)]
            else:  # complete but with a broken checksum
                torn = full[:9] + bytes([full[9] ^ 0xFF]) + full[10:]
            script.append(["torn", torn.hex()])
        else:
            script.append(["snapshot"])
            expected.append(["snapshot", sorted(model), [model[k] for k in sorted(model)],
                             len(model)])
    script.append(["reopen"])
    script.append(["snapshot"])
    expected.append(["snapshot", sorted(model), [model[k] for k in sorted(model)], len(model)])
    return script, expected


def all_cases():
    rng = random.Random(SEED)
    return [make_script(rng, n) for n in range(36)]


def cases():
    """The call's input: the 36 scripts."""
    return [script for script, _ in all_cases()]


def expected(made):
    return [want for _, want in all_cases()]
