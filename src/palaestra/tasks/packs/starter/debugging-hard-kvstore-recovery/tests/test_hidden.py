"""Hidden tests for kvstore.

The parent generates random operation scripts (puts/deletes with Unicode keys and values,
restarts, compactions, torn writes appended to the log, pre-existing log files) and a child
process runs them against the agent's KVStore, recording what it observes. The parent replays
the script on a plain dict and compares every observation.
"""

import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import zlib

CHILD = r'''
import json, os, sys
sys.path.insert(0, "/app")
from kvstore import KVStore
scripts = json.load(open(sys.argv[1]))
results = []
for n, script in enumerate(scripts):
    path = os.path.join(sys.argv[3], f"store_{n}.kv")
    obs = []
    store = None
    try:
        for op in script:
            kind = op[0]
            if kind == "file":
                with open(path, "wb") as f:
                    f.write(bytes.fromhex(op[1]))
            elif kind == "open":
                store = KVStore(path)
            elif kind == "put":
                store.put(op[1], op[2])
            elif kind == "del":
                obs.append(["del", store.delete(op[1])])
            elif kind == "get":
                obs.append(["get", store.get(op[1], "<default>"), op[1] in store])
            elif kind == "compact":
                store.compact()
            elif kind == "reopen":
                store.close()
                store = KVStore(path)
            elif kind == "torn":
                store.close()
                with open(path, "ab") as f:
                    f.write(bytes.fromhex(op[1]))
                store = KVStore(path)
            elif kind == "snapshot":
                keys = store.keys()
                obs.append(["snapshot", keys, [store.get(k) for k in keys], len(store)])
        store.close()
    except Exception as e:
        obs.append(["error", type(e).__name__ + ": " + str(e)[:300]])
    results.append(obs)
json.dump(results, open(sys.argv[2], "w"))
'''

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


def main():
    rng = random.Random(2718)
    scripts, expected = [], []
    for n in range(36):
        s, e = make_script(rng, n)
        scripts.append(s)
        expected.append(e)
    with tempfile.TemporaryDirectory() as d:
        os.chown(d, 65534, 65534)  # the agent's code runs as nobody
        inp, outp = os.path.join(d, "in.json"), os.path.join(d, "out.json")
        work = os.path.join(d, "stores")
        os.mkdir(work)
        os.chown(work, 65534, 65534)
        with open(inp, "w") as f:
            json.dump(scripts, f)
        try:
            proc = subprocess.run([sys.executable, "-I", "-c", CHILD, inp, outp, work],
                                  cwd="/app", user=65534, group=65534, extra_groups=[], capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            print("FAIL: the scenarios did not finish within 60 s")
            return 1
        if proc.returncode != 0:
            print("FAIL: the scenario runner crashed:\n" + proc.stderr[-2000:])
            return 1
        with open(outp) as f:
            results = json.load(f)
    failures = 0
    for n, (want, got) in enumerate(zip(expected, results)):
        if got != want:
            failures += 1
            if failures <= 5:
                i = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b),
                         min(len(want), len(got)))
                print(f"FAIL scenario {n}, observation {i}:\n  expected "
                      f"{str(want[i] if i < len(want) else None)[:400]}\n  got      "
                      f"{str(got[i] if i < len(got) else None)[:400]}")
    print(f"{len(expected) - failures}/{len(expected)} scenarios passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
