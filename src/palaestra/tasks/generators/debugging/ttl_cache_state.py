"""ttl-cache-state: a stateful LRU cache with expiry (driven by a manual clock, so every
interleaving is deterministic) that loses or leaks state.

Bugs come from a pool of seven: statistics shared between instances (a class-level dict),
reads that do not refresh recency, updates that evict, the expiry boundary, evicting a live
entry while expired ones are still held, ``len()`` counting expired entries, ``delete`` of an
expired key. Difficulty knobs: the number of bugs (2 / 3 / 4), their subtlety, how much the
incident notes reveal, and the length of the hidden operation traces. The hidden test replays
secret traces of interleaved operations on two caches sharing one clock on the agent's cache
and compares every result with the correct cache's, computed when the task is generated.
"""

from __future__ import annotations

import random
import textwrap

from palaestra.tasks.generators import family
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.debugging._kit import (
    Bug,
    bug_solutions,
    call_tests,
    choose_bugs,
    inject,
    wrong_variants,
)

_PACKAGES = ["memo", "hotcache", "tinycache", "kvcache", "sessions"]
_CLASSES = ["TTLCache", "ExpiringLRU", "SessionCache", "LeaseCache"]


def _sources(pkg: str, cls: str) -> dict[str, str]:
    return {
        f"{pkg}/__init__.py": f'"""{pkg}: an in-memory LRU cache with expiry."""\n',
        f"{pkg}/clock.py": textwrap.dedent(
            '''\
            """Clocks. Tests drive the cache with a ManualClock, so time only moves on purpose."""

            import time


            class SystemClock:
                def now(self):
                    return time.monotonic()


            class ManualClock:
                def __init__(self, start=0.0):
                    self._now = start

                def now(self):
                    return self._now

                def advance(self, seconds):
                    if seconds < 0:
                        raise ValueError("time does not go backwards")
                    self._now += seconds
            '''
        ),
        f"{pkg}/cache.py": textwrap.dedent(
            f'''\
            """An LRU cache whose entries expire `ttl` seconds after they were written."""

            from collections import OrderedDict

            from .clock import SystemClock


            class {cls}:
                """At most `capacity` live entries; each expires `ttl` seconds after its last
                put (it is gone at exactly put time + ttl). Reads refresh recency, not expiry.

                Putting a new key into a full cache first drops every expired entry (each
                counted in stats()["expirations"]); if it is still full, the least recently
                used entry is evicted (stats()["evictions"]). Putting an existing live key
                replaces its value, restarts its ttl and makes it the most recently used; it
                never evicts anything. Statistics belong to each cache instance.
                """

                def __init__(self, capacity, ttl, clock=None):
                    if capacity < 1 or ttl <= 0:
                        raise ValueError("capacity must be >= 1 and ttl > 0")
                    self.capacity, self.ttl = capacity, ttl
                    self._clock = clock or SystemClock()
                    self._data = OrderedDict()  # key -> (value, expires_at), LRU first
                    self._stats = {{"hits": 0, "misses": 0, "evictions": 0, "expirations": 0}}

                def _alive(self, expires_at):
                    return self._clock.now() < expires_at

                def _purge(self):
                    for key in [k for k, (_, exp) in self._data.items() if not self._alive(exp)]:
                        del self._data[key]
                        self._stats["expirations"] += 1

                def get(self, key, default=None):
                    """The live value of key (a hit, now most recently used), else default (a
                    miss; an expired entry found on the way is dropped and counted)."""
                    entry = self._data.get(key)
                    if entry is not None and not self._alive(entry[1]):
                        del self._data[key]
                        self._stats["expirations"] += 1
                        entry = None
                    if entry is None:
                        self._stats["misses"] += 1
                        return default
                    self._stats["hits"] += 1
                    self._data.move_to_end(key)
                    return entry[0]

                def put(self, key, value):
                    expires_at = self._clock.now() + self.ttl
                    if key in self._data and self._alive(self._data[key][1]):
                        self._data[key] = (value, expires_at)
                        self._data.move_to_end(key)
                        return
                    self._data.pop(key, None)
                    if len(self._data) >= self.capacity:
                        self._purge()
                    if len(self._data) >= self.capacity:
                        self._data.popitem(last=False)
                        self._stats["evictions"] += 1
                    self._data[key] = (value, expires_at)

                def delete(self, key):
                    """Remove key; True when a live entry was removed."""
                    entry = self._data.pop(key, None)
                    return entry is not None and self._alive(entry[1])

                def keys(self):
                    """Live keys, least recently used first."""
                    return [k for k, (_, exp) in self._data.items() if self._alive(exp)]

                def __len__(self):
                    """The number of live entries."""
                    return len(self.keys())

                def stats(self):
                    return dict(self._stats)
            '''
        ),
    }


def _bugs(pkg: str, cls: str) -> list[Bug]:
    p = f"{pkg}/cache.py"
    stats_line = (
        '        self._stats = {"hits": 0, "misses": 0, "evictions": 0, "expirations": 0}\n'
    )
    return [
        Bug(
            "shared-stats",
            p,
            (
                (stats_line, ""),
                (
                    "    def __init__(self, capacity, ttl, clock=None):",
                    '    _stats = {"hits": 0, "misses": 0, "evictions": 0, "expirations": 0}\n\n'
                    "    def __init__(self, capacity, ttl, clock=None):",
                ),
            ),
            (
                (stats_line, ""),
                (
                    "    def __init__(self, capacity, ttl, clock=None):",
                    '    _STATS = {"hits": 0, "misses": 0, "evictions": 0, "expirations": 0}\n\n'
                    "    def __init__(self, capacity, ttl, clock=None):",
                ),
                (
                    "self._clock = clock or SystemClock()",
                    "self._clock = clock or SystemClock()\n        self._stats = self._STATS",
                ),  # fmt: skip
            ),
            "The hit rate on the dashboard counts hits of every cache in the process together.",
            "    def test_stats_per_instance(self):\n"
            "        a, b = Cache(2, 10, ManualClock()), Cache(2, 10, ManualClock())\n"
            "        a.get('x')\n"
            "        self.assertEqual(b.stats()['misses'], 0)\n",
        ),
        Bug(
            "read-no-refresh",
            p,
            (
                (
                    "        self._data.move_to_end(key)\n        return entry[0]",
                    "        return entry[0]",
                ),
            ),  # fmt: skip
            (
                (
                    "        self._data.move_to_end(key)\n        return entry[0]",
                    "        self._data[key] = (entry[0], self._clock.now() + self.ttl)\n"
                    "        self._data.move_to_end(key)\n        return entry[0]",
                ),
            ),
            "Hot keys that are read all the time get evicted first.",
            "    def test_read_refreshes(self):\n"
            "        c = Cache(2, 100, ManualClock())\n"
            "        c.put('a', 1); c.put('b', 2); c.get('a'); c.put('c', 3)\n"
            "        self.assertEqual(c.keys(), ['a', 'c'])\n",
        ),
        Bug(
            "update-evicts",
            p,
            (
                (
                    "        if key in self._data and self._alive(self._data[key][1]):\n"
                    "            self._data[key] = (value, expires_at)\n"
                    "            self._data.move_to_end(key)\n"
                    "            return\n"
                    "        self._data.pop(key, None)\n",
                    "",
                ),
                (
                    "        self._data[key] = (value, expires_at)\n\n    def delete",
                    "        self._data[key] = (value, expires_at)\n"
                    "        self._data.move_to_end(key)\n\n    def delete",
                ),
            ),
            (
                (
                    "            self._data[key] = (value, expires_at)\n"
                    "            self._data.move_to_end(key)\n"
                    "            return\n",
                    "            self._data[key] = (value, expires_at)\n            return\n",
                ),
            ),
            "Updating a key in a full cache throws another key out.",
            "    def test_update_does_not_evict(self):\n"
            "        c = Cache(2, 100, ManualClock())\n"
            "        c.put('a', 1); c.put('b', 2); c.put('b', 3)\n"
            "        self.assertEqual(c.keys(), ['a', 'b'])\n",
        ),
        Bug(
            "expiry-boundary",
            p,
            (("return self._clock.now() < expires_at", "return self._clock.now() <= expires_at"),),
            (),
            "Sessions are still valid at the exact second they should have expired.",
            "    def test_expiry_boundary(self):\n"
            "        clock = ManualClock()\n"
            "        c = Cache(2, 5, clock)\n"
            "        c.put('a', 1); clock.advance(5)\n"
            "        self.assertIsNone(c.get('a'))\n",
            subtle=True,
        ),
        Bug(
            "evict-before-purge",
            p,
            (("            self._purge()\n", ""),),
            (
                (
                    "            self._purge()\n",
                    "            for k in [k for k, (_, e) in self._data.items() if not self._alive(e)]:\n"
                    "                del self._data[k]\n",
                ),
            ),
            "A full cache evicts live entries while expired ones are still sitting in it.",
            "    def test_expired_go_first(self):\n"
            "        clock = ManualClock()\n"
            "        c = Cache(2, 5, clock)\n"
            "        c.put('a', 1); clock.advance(3); c.put('b', 2); clock.advance(3)\n"
            "        c.put('c', 3)\n"
            "        self.assertEqual(c.keys(), ['b', 'c'])\n"
            "        self.assertEqual(c.stats()['evictions'], 0)\n",
            subtle=True,
        ),
        Bug(
            "len-counts-expired",
            p,
            (("        return len(self.keys())", "        return len(self._data)"),),
            (),
            "len(cache) reports more entries than keys() lists.",
            "    def test_len_live_only(self):\n"
            "        clock = ManualClock()\n"
            "        c = Cache(3, 5, clock)\n"
            "        c.put('a', 1); clock.advance(6)\n"
            "        self.assertEqual(len(c), 0)\n",
            subtle=True,
        ),
        Bug(
            "delete-expired",
            p,
            (("return entry is not None and self._alive(entry[1])", "return entry is not None"),),
            (
                (
                    "return entry is not None and self._alive(entry[1])",
                    "return entry is not None and entry[0] is not None",
                ),
            ),
            "Logging out an already expired session reports that a session was removed.",
            "    def test_delete_expired(self):\n"
            "        clock = ManualClock()\n"
            "        c = Cache(3, 5, clock)\n"
            "        c.put('a', 1); clock.advance(9)\n"
            "        self.assertFalse(c.delete('a'))\n",
            subtle=True,
        ),
    ]


@family(
    "ttl-cache-state",
    category="debugging",
    summary="Stateful LRU+TTL cache under a manual clock with 2-4 injected state bugs",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    pkg, cls = rng.choice(_PACKAGES), rng.choice(_CLASSES)
    correct = _sources(pkg, cls)
    n_obvious, n_subtle = {"easy": (2, 0), "medium": (2, 1), "hard": (1, 3)}[spec.tier]
    bugs = choose_bugs(rng, _bugs(pkg, cls), n_obvious, n_subtle)
    shown_n = {"easy": len(bugs), "medium": len(bugs) - 1, "hard": 2}[spec.tier]
    shown = sorted(rng.sample(bugs, shown_n), key=bugs.index)
    workspace = inject(correct, bugs)
    workspace["INCIDENTS.md"] = "# Cache incidents\n\n" + "\n".join(f"- {b.symptom}" for b in shown)
    workspace["tests/test_cache.py"] = (
        "import unittest\n\n"
        f"from {pkg}.cache import {cls} as Cache\n"
        f"from {pkg}.clock import ManualClock\n\n\n"
        "class CacheTests(unittest.TestCase):\n"
        + "\n".join(b.visible_test for b in shown)
        + '\n\nif __name__ == "__main__":\n    unittest.main()\n'
    )
    secret = rng.randrange(2**31)
    instruction = textwrap.dedent(
        f"""\
        # Fix the session cache

        `/app/{pkg}/cache.py` holds `{cls}`, the in-memory LRU cache with expiry our services
        keep sessions in. After a few incidents (`/app/INCIDENTS.md`) we know it misbehaves,
        and `cd /app && python3 -m unittest discover -s tests` fails.

        Make the cache behave exactly as its docstrings specify, for any sequence of calls and
        any number of cache instances{
            "" if spec.tier == "easy" else " (the incident list may not name every problem)"
        }.
        Time comes from the clock object passed in (tests use `ManualClock`), so behaviour is
        deterministic. Keep the class name, its constructor and method signatures. Only the
        standard library is available.
        """
    )
    wrongs = wrong_variants(correct, bugs, rng)
    return GeneratedTask(
        instruction=instruction,
        workspace=workspace,
        tests=_tests(correct, pkg, cls, _traces(secret, spec.iscale(12, 30), spec.iscale(80, 300))),
        **bug_solutions(correct, workspace, wrongs, note="the correct cache"),
        tags=("python", "debugging", "state", "cache"),
    )


#: One list of results a trace: two caches sharing one clock, every call's result.
_DRIVER = """
from PKG.cache import CLS as Cache
from PKG.clock import ManualClock
results = []
for capacity, ttl, ops in INPUT:
    clock = ManualClock(100.0)
    caches = {"a": Cache(capacity, ttl, clock), "b": Cache(capacity + 1, ttl * 2, clock)}
    out = []
    for op in ops:
        try:
            if op[0] == "tick":
                clock.advance(op[1])
                continue
            c = caches[op[1]]
            if op[0] == "put":
                out.append(c.put(op[2], op[3]))
            elif op[0] == "get":
                out.append(c.get(op[2], "<missing>"))
            elif op[0] == "del":
                out.append(c.delete(op[2]))
            elif op[0] == "len":
                out.append(len(c))
            elif op[0] == "keys":
                out.append(list(c.keys()))
            else:
                out.append(c.stats())
        except Exception as e:
            out.append("raised " + type(e).__name__)
    results.append(out)
emit(results)
"""

#: Targeted traces, before the random ones: [capacity, ttl, ops].
_TARGETED = [
    [
        2,
        5,
        [
            ["put", "a", "k1", 1],
            ["put", "a", "k2", 2],
            ["get", "a", "k1"],
            ["put", "a", "k3", 3],
            ["keys", "a"],
            ["put", "a", "k1", 9],
            ["keys", "a"],
            ["stats", "a"],
            ["stats", "b"],
        ],
    ],
    [
        2,
        4,
        [
            ["put", "a", "x", 1],
            ["tick", 4],
            ["get", "a", "x"],
            ["put", "a", "y", 1],
            ["tick", 2],
            ["put", "a", "z", 2],
            ["tick", 2.5],
            ["put", "a", "w", 3],
            ["keys", "a"],
            ["len", "a"],
            ["del", "a", "z"],
            ["del", "a", "w"],
            ["stats", "a"],
        ],
    ],
    [
        3,
        5,
        [
            ["put", "b", "s", 1],
            ["tick", 11],
            ["len", "b"],
            ["del", "b", "s"],
            ["get", "a", "s"],
            ["stats", "b"],
            ["stats", "a"],
        ],
    ],
]


def _traces(secret: int, n_traces: int, n_ops: int) -> list:
    """The targeted traces, then random interleavings of every operation on two caches."""
    rng = random.Random(secret)
    traces = [list(t) for t in _TARGETED]
    for _ in range(n_traces):
        capacity, ttl = rng.randrange(2, 5), rng.choice([2, 3, 5])
        keys = [f"k{i}" for i in range(capacity + rng.randrange(1, 4))]
        ops: list[list] = []
        for _ in range(n_ops):
            r, c = rng.random(), rng.choice("aab")
            if r < 0.3:
                ops.append(["put", c, rng.choice(keys), rng.randrange(100)])
            elif r < 0.55:
                ops.append(["get", c, rng.choice(keys)])
            elif r < 0.62:
                ops.append(["del", c, rng.choice(keys)])
            elif r < 0.7:
                ops.append(["len", c])
            elif r < 0.78:
                ops.append(["keys", c])
            elif r < 0.83:
                ops.append(["stats", c])
            else:
                ops.append(["tick", rng.choice([0.5, 1, 1, 2, ttl])])
        traces.append([capacity, ttl, ops + [["stats", "a"], ["stats", "b"]]])
    return traces


def _tests(correct: dict[str, str], pkg: str, cls: str, traces: list) -> dict:
    cases = [
        (f"trace {k} (capacity {t[0]}, ttl {t[1]}, {len(t[2])} ops)", t)
        for k, t in enumerate(traces)
    ]
    driver = _DRIVER.replace("PKG", pkg).replace("CLS", cls)
    # each trace alone: the driver emits one list of results a trace
    return call_tests(correct, driver, cases, what="op")
