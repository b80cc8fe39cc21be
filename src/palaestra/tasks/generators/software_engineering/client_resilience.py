"""client-resilience: make a small API client library retry, cache and load layered config.

The workspace is a package ``<pkg>/`` (transport, config, client) whose ``Config`` already has
``retries``/``backoff``/``cache`` knobs that the client ignores, with its own visible tests. The
checker imports nothing from /app: it runs scripted scenarios (a fake transport with a queue of
responses and connection errors, a fake clock and sleep) against the agent's package and against
a private reference package, as ``nobody``, and compares the traces: transport calls, sleeps,
results and errors. Scenarios are drawn from the task's secret.

Difficulty knobs: easy adds retries (retryable statuses and connection errors, exponential
backoff capped, ``Retry-After``, POST never retried); medium adds a GET cache with a TTL on an
injected clock and LRU eviction; hard adds ``Config.load`` layering defaults < JSON file <
environment < overrides, with typed parsing and precise errors. Scenario count grows.
"""

from __future__ import annotations

import random
import textwrap

from palaestra.tasks.generators import attacks, family, solve_sh_writing
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

_PKGS = ["weatherkit", "shipments", "geodata", "billing_api", "catalog_client"]

_TRANSPORT = '''\
"""The transport: any callable ``transport(method, path, params) -> Response``.

It raises ``TransportError`` when no response came back (connection reset, timeout)."""
from dataclasses import dataclass, field


class TransportError(Exception):
    pass


@dataclass
class Response:
    status: int
    body: dict
    headers: dict = field(default_factory=dict)
'''

_CONFIG_OLD = '''\
"""Client settings."""
from dataclasses import dataclass


@dataclass
class Config:
    retries: int = 0  # extra attempts after the first
    backoff_base: float = 0.5  # seconds
    backoff_max: float = 8.0  # seconds
    cache_ttl: float = 0.0  # seconds; 0 disables the cache
    cache_size: int = 128  # entries
'''

_CLIENT_OLD = '''\
"""The API client."""
import time

from {pkg}.config import Config


class HTTPError(Exception):
    def __init__(self, status, body):
        super().__init__(f"HTTP {{status}}")
        self.status = status
        self.body = body


class Client:
    def __init__(self, transport, config=None, *, sleep=time.sleep, clock=time.monotonic):
        self.transport = transport
        self.config = config or Config()
        self.sleep = sleep
        self.clock = clock

    def _call(self, method, path, params):
        resp = self.transport(method, path, params)
        if resp.status >= 400:
            raise HTTPError(resp.status, resp.body)
        return resp.body

    def get(self, path, **params):
        return self._call("GET", path, params)

    def post(self, path, **params):
        return self._call("POST", path, params)
'''

_CONFIG_NEW = '''\
"""Client settings, layered: defaults < JSON file < environment < explicit overrides."""
import dataclasses
import json
import os
from dataclasses import dataclass

PREFIX = "{prefix}"


@dataclass
class Config:
    retries: int = 0  # extra attempts after the first
    backoff_base: float = 0.5  # seconds
    backoff_max: float = 8.0  # seconds
    cache_ttl: float = 0.0  # seconds; 0 disables the cache
    cache_size: int = 128  # entries

    @classmethod
    def load(cls, path=None, env=None, **overrides):
        types = {{f.name: f.type for f in dataclasses.fields(cls)}}
        values = {{}}

        def parse(where, name, raw):
            kind = types[name]
            if not (isinstance(raw, bool) or (kind is int and isinstance(raw, float))):
                try:
                    return kind(raw)
                except (TypeError, ValueError):
                    pass
            raise ValueError(f"{{where}}: expected {{kind.__name__}}, got {{raw!r}}")

        if path is not None:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            for key, raw in data.items():
                if key not in types:
                    raise ValueError(f"unknown config key: {{key}}")
                values[key] = parse(key, key, raw)
        env = os.environ if env is None else env
        for name in types:
            var = f"{{PREFIX}}_{{name.upper()}}"
            if var in env:
                values[name] = parse(var, name, env[var])
        for key, raw in overrides.items():
            if key not in types:
                raise ValueError(f"unknown config key: {{key}}")
            if raw is not None:
                values[key] = parse(key, key, raw)
        config = cls(**values)
        if config.retries < 0:
            raise ValueError("retries must be >= 0")
        if config.cache_size < 1:
            raise ValueError("cache_size must be >= 1")
        return config
'''

_CLIENT_NEW = '''\
"""The API client: retries with backoff, a GET cache (TTL, LRU)."""
import time
from collections import OrderedDict

from {pkg}.config import Config
from {pkg}.transport import TransportError

RETRYABLE = (429, 502, 503, 504)


class HTTPError(Exception):
    def __init__(self, status, body):
        super().__init__(f"HTTP {{status}}")
        self.status = status
        self.body = body


class Client:
    def __init__(self, transport, config=None, *, sleep=time.sleep, clock=time.monotonic):
        self.transport = transport
        self.config = config or Config()
        self.sleep = sleep
        self.clock = clock
        self._cache = OrderedDict()

    def _delay(self, attempt, resp):
        if resp is not None and resp.status in (429, 503):
            after = resp.headers.get("Retry-After")
            if isinstance(after, str) and after.isdigit():
                return float(int(after))
        return min(self.config.backoff_max, self.config.backoff_base * 2 ** attempt)

    def _call(self, method, path, params):
        attempts = 1 + (self.config.retries if method == "GET" else 0)
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                resp = self.transport(method, path, params)
            except TransportError:
                if last:
                    raise
                self.sleep(self._delay(attempt, None))
                continue
            if resp.status in RETRYABLE and not last:
                self.sleep(self._delay(attempt, resp))
                continue
            if resp.status >= 400:
                raise HTTPError(resp.status, resp.body)
            return resp.body

    def get(self, path, **params):
        if self.config.cache_ttl <= 0:
            return self._call("GET", path, params)
        key = (path, tuple(sorted(params.items())))
        hit = self._cache.get(key)
        if hit is not None:
            stored, body = hit
            if self.clock() - stored < self.config.cache_ttl:
                self._cache.move_to_end(key)
                return body
            del self._cache[key]
        body = self._call("GET", path, params)
        self._cache[key] = (self.clock(), body)
        self._cache.move_to_end(key)
        while len(self._cache) > self.config.cache_size:
            self._cache.popitem(last=False)
        return body

    def post(self, path, **params):
        return self._call("POST", path, params)
'''

_VISIBLE_TESTS = '''\
"""The package's own tests: `cd /app && python3 -m unittest discover -s tests`."""
import unittest

from {pkg}.client import Client, HTTPError
from {pkg}.transport import Response


class FakeTransport:
    def __init__(self, responses):
        self.responses = list(responses)
        self.calls = []

    def __call__(self, method, path, params):
        self.calls.append((method, path, params))
        return self.responses.pop(0)


class ClientTests(unittest.TestCase):
    def test_get_returns_body(self):
        t = FakeTransport([Response(200, {{"ok": 1}})])
        self.assertEqual(Client(t).get("/items", page=2), {{"ok": 1}})
        self.assertEqual(t.calls, [("GET", "/items", {{"page": 2}})])

    def test_http_error(self):
        t = FakeTransport([Response(404, {{"error": "nope"}})])
        with self.assertRaises(HTTPError) as ctx:
            Client(t).get("/missing")
        self.assertEqual(ctx.exception.status, 404)


if __name__ == "__main__":
    unittest.main()
'''

# The scenario runner, executed as nobody against a package (the agent's or the reference).
_RUNNER = """
from PKG.client import Client, HTTPError
from PKG.config import Config
from PKG.transport import Response, TransportError


def run(scn):
    outcomes = list(scn["outcomes"])
    calls, sleeps, now = [], [], [0.0]

    def transport(method, path, params):
        calls.append([method, path, sorted(params.items())])
        o = outcomes.pop(0) if outcomes else ["resp", 200, {"default": len(calls)}, {}]
        if o[0] == "err":
            raise TransportError("connection reset")
        return Response(o[1], o[2], o[3])

    def sleep(seconds):
        sleeps.append(round(seconds, 9))
        now[0] += seconds

    client = Client(transport, Config(**scn["config"]), sleep=sleep, clock=lambda: now[0])
    results = []
    for op in scn["ops"]:
        if op[0] == "advance":
            now[0] += op[1]
            continue
        try:
            results.append(["ok", getattr(client, op[0])(op[1], **op[2])])
        except HTTPError as e:
            results.append(["http", e.status])
        except TransportError:
            results.append(["transport"])
    return {"calls": calls, "sleeps": sleeps, "results": results}


out = []
for scn in INPUT:
    try:
        trace = run(scn)
    except Exception as e:
        trace = {"crash": type(e).__name__ + ": " + str(e)}
    out += [trace.get(key, trace) for key in KEYS]
emit(out)
"""

#: A scenario's checks: its trace's parts, in this order.
_KEYS = ("calls", "sleeps", "results")

_LOADER = """
import json, os, tempfile
from PKG.config import Config

out = []
for case in INPUT:
    path = None
    if case["file"] is not None:
        fd, path = tempfile.mkstemp(suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(case["file"], f)
    try:
        cfg = Config.load(path, env=case["env"], **case["overrides"])
        out.append(["ok", [cfg.retries, cfg.backoff_base, cfg.backoff_max, cfg.cache_ttl, cfg.cache_size]])
    except ValueError as e:
        out.append(["ValueError", str(e)])
    except Exception as e:
        out.append([type(e).__name__, str(e)])
    finally:
        if path:
            os.remove(path)
emit(out)
"""


def _scenarios(rng, tier, count):
    """Scripted scenarios: a config, queued transport outcomes and client operations."""
    paths = ["/items", "/users", "/orders", "/stats", "/search"]
    scns = []
    for k in range(count):
        cache = tier != "easy" and k % 2 == 1
        config = {
            "retries": rng.randrange(1, 5),
            "backoff_base": rng.choice([0.1, 0.25, 0.5, 1.0]),
            "backoff_max": rng.choice([0.6, 1.5, 3.0, 100.0]),
            "cache_ttl": rng.choice([5.0, 30.0]) if cache else 0.0,
            "cache_size": rng.randrange(2, 5),
        }
        outcomes, ops = [], []
        for _ in range(rng.randrange(6, 14)):
            roll = rng.random()
            if roll < 0.35:
                outcomes.append(["resp", 200, {"v": rng.randrange(1000)}, {}])
            elif roll < 0.5:
                outcomes.append(["err"])
            elif roll < 0.62:
                after = rng.choice([None, "2", "7", "soon"])
                outcomes.append(
                    ["resp", rng.choice([429, 503]), {}, {"Retry-After": after} if after else {}]
                )
            elif roll < 0.77:
                outcomes.append(["resp", rng.choice([502, 504]), {}, {}])
            else:
                outcomes.append(["resp", rng.choice([400, 404, 500]), {"error": "x"}, {}])
        keys = [
            (rng.choice(paths), {"page": rng.randrange(1, 4)})
            for _ in range(config["cache_size"] + 2)
        ]
        for _ in range(rng.randrange(5, 10)):
            if cache and rng.random() < 0.3:
                ops.append(
                    [
                        "advance",
                        rng.choice(
                            [
                                1.0,
                                config["cache_ttl"],
                                config["cache_ttl"] - 0.5,
                                2 * config["cache_ttl"],
                            ]
                        ),
                    ]
                )
            else:
                path, params = rng.choice(keys)
                ops.append(["post" if rng.random() < 0.15 else "get", path, params])
        scns.append({"config": config, "outcomes": outcomes, "ops": ops})
    if tier != "easy":  # LRU, no failures: fill, touch the oldest, add one, ask both again
        size = rng.randrange(2, 5)
        ttl = rng.choice([5.0, 30.0])
        fresh = [["get", "/lru/%d" % i, {"q": i}] for i in range(size + 1)]
        ops = fresh[:size] + [fresh[0], fresh[size], fresh[0], fresh[1], ["advance", ttl], fresh[0]]
        scns.append(
            {
                "config": {
                    "retries": 1,
                    "backoff_base": 0.5,
                    "backoff_max": 8.0,
                    "cache_ttl": ttl,
                    "cache_size": size,
                },
                "outcomes": [],
                "ops": ops,
            }
        )
    # retries run out; Retry-After; a POST is sent once; 500 is final
    scns.append(
        {
            "config": {
                "retries": 2,
                "backoff_base": 0.5,
                "backoff_max": 8.0,
                "cache_ttl": 0.0,
                "cache_size": 2,
            },
            "outcomes": [
                ["resp", 503, {}, {}],
                ["err"],
                ["resp", 502, {}, {}],
                ["err"],
                ["err"],
                ["err"],
                ["resp", 503, {}, {"Retry-After": "3"}],
                ["resp", 200, {"v": 1}, {}],
                ["resp", 502, {}, {}],
                ["resp", 500, {}, {}],
            ],
            "ops": [
                ["get", "/a", {}],
                ["get", "/b", {}],
                ["get", "/d", {}],
                ["post", "/c", {}],
                ["get", "/e", {}],
            ],
        }
    )
    # the backoff cap
    scns.append({"config": {"retries": 4, "backoff_base": 1.0, "backoff_max": 1.5, "cache_ttl": 0.0, "cache_size": 2},
                 "outcomes": [["err"]] * 5, "ops": [["get", "/cap", {"x": 1}]]})  # fmt: skip
    return scns


def _load_cases(rng, prefix):
    def env_name(f):
        return "%s_%s" % (prefix, f.upper())

    cases = []
    for _ in range(6):
        file = (
            {"retries": rng.randrange(0, 6), "cache_ttl": rng.choice([1, 2.5, 10])}
            if rng.random() < 0.7
            else None
        )
        env = {}
        if rng.random() < 0.7:
            env[env_name("retries")] = str(rng.randrange(0, 9))
        if rng.random() < 0.5:
            env[env_name("backoff_max")] = rng.choice(["4", "2.5", "60"])
        env["OTHER_RETRIES"] = "99"
        overrides = {}
        if rng.random() < 0.5:
            overrides["retries"] = rng.choice([None, 1, 7])
        if rng.random() < 0.5:
            overrides["cache_size"] = rng.randrange(1, 50)
        cases.append({"file": file, "env": env, "overrides": overrides})
    cases += [
        {"file": {"retries": 2, "timeout": 3}, "env": {}, "overrides": {}},
        {"file": None, "env": {env_name("retries"): "three"}, "overrides": {}},
        {"file": None, "env": {env_name("cache_ttl"): "1e1", env_name("cache_size"): "4"}, "overrides": {}},
        {"file": {"cache_size": 2.5}, "env": {}, "overrides": {}},
        {"file": {"retries": True}, "env": {}, "overrides": {}},
        {"file": None, "env": {}, "overrides": {"retries": -1}},
        {"file": None, "env": {}, "overrides": {"cache_size": 0}},
        {"file": None, "env": {}, "overrides": {"colour": "red"}},
        {"file": None, "env": {env_name("retries"): "5"}, "overrides": {"retries": 2}},
        {"file": {"backoff_base": 2}, "env": {env_name("backoff_base"): "0.75"}, "overrides": {"backoff_base": None}},
    ]  # fmt: skip
    rng.shuffle(cases)
    return cases


@family(
    "client-resilience",
    category="software-engineering",
    summary="Add retries with backoff, a TTL/LRU cache and layered config to an API client",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    pkg = rng.choice(_PKGS)
    prefix = pkg.upper()
    tier = spec.tier
    secret = rng.randrange(2**31)
    count = spec.iscale(3, 8)

    asks = [
        """\
- **Retries** (GET only; a POST is sent exactly once, whatever happens). A GET is attempted up
  to `1 + config.retries` times. It is retried when the transport raises `TransportError` or
  the response status is 429, 502, 503 or 504; any other status >= 400 raises `HTTPError` at
  once. Before retry number `k` (the first retry is `k = 0`) call `self.sleep(delay)` with
  `delay = min(config.backoff_max, config.backoff_base * 2 ** k)`, except that a 429 or 503
  response with a `Retry-After` header made only of digits sleeps that many seconds instead (as
  a float, not capped). When the attempts run out, raise what the last attempt gave
  (`HTTPError` with its status, or the `TransportError`). Never sleep after the last attempt."""
    ]
    if tier != "easy":
        asks.append(
            """\
- **A GET cache**, on when `config.cache_ttl > 0`. The key is the path and the parameters
  (order-independent). A successful result (after retries) is stored with the time
  `self.clock()` returned after it came back; an entry is fresh while
  `clock() - stored < cache_ttl` (strictly), and a fresh hit returns the stored body without
  calling the transport. A stale entry found on lookup is dropped and the GET goes out again.
  Errors are never cached; POSTs neither read nor fill the cache. At most `config.cache_size`
  entries are kept: when a store goes over, evict the **least recently used** (a fresh hit or a
  store counts as a use; stale entries count towards the size until dropped or evicted)."""
        )
    if tier == "hard":
        asks.append(
            f"""\
- **Layered configuration**: a classmethod `Config.load(path=None, env=None, **overrides)`.
  Start from the defaults; then the JSON object in the file `path` (if given); then the
  environment (`env`, a mapping, defaulting to `os.environ`): variable `{prefix}_<FIELD>` (the
  field name in upper case, e.g. `{prefix}_RETRIES`); then `overrides` (a `None` value means
  "not given"). Each layer replaces the values it sets. Values are converted to the field's type
  (`int` or `float`) with `int(...)`/`float(...)`; booleans are never accepted, and a float is
  not accepted for an `int` field. Errors are `ValueError` with exactly these messages:
  `unknown config key: <key>` (file or overrides), `<where>: expected <int|float>, got <repr of
  the raw value>` where `<where>` is the file key, the environment variable name or the override
  name, then `retries must be >= 0` and `cache_size must be >= 1` (checked on the final values,
  in that order)."""
        )
    instruction = textwrap.dedent(
        """\
        # Make the `{pkg}` client resilient

        `/app/{pkg}/` is our API client library: `transport.py` (`Response`, `TransportError`;
        a transport is any callable `transport(method, path, params)`), `config.py` (`Config`)
        and `client.py` (`Client(transport, config=None, *, sleep=time.sleep,
        clock=time.monotonic)` with `get(path, **params)` and `post(path, **params)`, returning
        the response body or raising `HTTPError` with `.status`). `Config` already has
        `retries`, `backoff_*` and `cache_*` fields, but the client ignores them. Please add:

        {asks}

        Keep the existing API and behaviour (the tests in `/app/tests/` must still pass:
        `cd /app && python3 -m unittest discover -s tests`). Always sleep through `self.sleep`
        and read the time through `self.clock` (tests inject fakes). Only the standard library
        is available.
        """
    ).format(pkg=pkg, asks="\n".join(asks))

    workspace = {
        f"{pkg}/__init__.py": f'"""{pkg}: a small API client."""\n',
        f"{pkg}/transport.py": _TRANSPORT,
        f"{pkg}/config.py": _CONFIG_OLD,
        f"{pkg}/client.py": _CLIENT_OLD.format(pkg=pkg),
        "tests/test_client.py": _VISIBLE_TESTS.format(pkg=pkg),
    }
    right_client = _CLIENT_NEW.format(pkg=pkg)
    right_config = _CONFIG_NEW.format(prefix=prefix)
    right = {f"{pkg}/client.py": right_client, f"{pkg}/config.py": right_config}

    def variant(client=right_client, config=right_config):
        return {f"{pkg}/client.py": client, f"{pkg}/config.py": config}

    wrong = {
        # one attempt short: `retries` counted as total attempts
        "retries-off-by-one": variant(
            right_client.replace(
                'attempts = 1 + (self.config.retries if method == "GET" else 0)',
                'attempts = max(1, self.config.retries) if method == "GET" else 1',
            )
        ),
        # ignores Retry-After
        "ignores-retry-after": variant(
            right_client.replace("if resp is not None and resp.status in (429, 503):", "if False:")
        ),
        # retries POSTs as well
        "retries-post": variant(
            right_client.replace(
                'attempts = 1 + (self.config.retries if method == "GET" else 0)',
                "attempts = 1 + self.config.retries",
            )
        ),
        # retries every 5xx, 500 included
        "retries-500": variant(
            right_client.replace(
                "if resp.status in RETRYABLE and not last:",
                "if (resp.status in RETRYABLE or resp.status >= 500) and not last:",
            )
        ),
        # backoff not capped by backoff_max
        "uncapped-backoff": variant(
            right_client.replace(
                "return min(self.config.backoff_max, self.config.backoff_base * 2 ** attempt)",
                "return self.config.backoff_base * 2 ** attempt",
            )
        ),
    }
    # an attack (issue 29): off by one, and on import it copies itself over the reference's
    # package wherever a run could write one
    wrong["swap-reference"] = {
        f"{pkg}/__init__.py": attacks.SWAP_REFERENCE,
        **wrong["retries-off-by-one"],
    }
    if tier != "easy":
        wrong["cache-ttl-inclusive"] = variant(
            right_client.replace(
                "if self.clock() - stored < self.config.cache_ttl:",
                "if self.clock() - stored <= self.config.cache_ttl:",
            )
        )
        wrong["fifo-eviction"] = variant(
            right_client.replace(
                "                self._cache.move_to_end(key)\n                return body",
                "                return body",
            )
        )
    if tier == "hard":
        wrong["env-beats-overrides"] = variant(
            config=right_config.replace(
                '        env = os.environ if env is None else env\n        for name in types:\n            var = f"{PREFIX}_{name.upper()}"\n            if var in env:\n                values[name] = parse(var, name, env[var])\n',
                "",
            ).replace(
                "        config = cls(**values)",
                '        env = os.environ if env is None else env\n        for name in types:\n            var = f"{PREFIX}_{name.upper()}"\n            if var in env:\n                values[name] = parse(var, name, env[var])\n        config = cls(**values)',
            )
        )
        wrong["lenient-file-keys"] = variant(
            config=right_config.replace(
                '            for key, raw in data.items():\n                if key not in types:\n                    raise ValueError(f"unknown config key: {key}")\n',
                "            for key, raw in data.items():\n                if key not in types:\n                    continue\n",
            )
        )
    return GeneratedTask(
        instruction=instruction,
        workspace=workspace,
        tests=_tests(pkg, prefix, tier, secret, count),
        solution={
            "solve.sh": solve_sh_writing(
                right, note="retry loop, OrderedDict LRU cache, layered load"
            )
        },
        wrong_solutions={
            n: {"solve.sh": solve_sh_writing(f, note=f"wrong: {n}")} for n, f in wrong.items()
        },
        tags=("python", "feature", "reliability", "library"),
        verifier_timeout_sec=240.0,
    )


def _tests(pkg: str, prefix: str, tier: str, secret: int, count: int) -> dict:
    """Scenarios (and, hard, Config.load cases) drawn from the task's secret, the reference
    package's traces fixed now; the checker runs them on the agent's package as nobody, each
    call in a fresh copy of /app, three checks a scenario and one a load case as before."""
    rng = random.Random(secret)
    scns = _scenarios(rng, tier, count)
    reference = {
        f"{pkg}/transport.py": _TRANSPORT,
        f"{pkg}/config.py": _CONFIG_NEW.format(prefix=prefix),
        f"{pkg}/client.py": _CLIENT_NEW.format(pkg=pkg),
        f"{pkg}/__init__.py": "",
    }
    runner = _RUNNER.replace("PKG", pkg).replace("KEYS", repr(_KEYS))
    wants = hs.emitted(reference, runner, scns)
    labels = [f"scenario {i}: {key}" for i in range(len(scns)) for key in _KEYS]
    calls = [hs.python_call(runner, scns, cases=len(wants), cpu=10)]
    if tier == "hard":
        loads = _load_cases(rng, prefix)
        loader = _LOADER.replace("PKG", pkg)
        wants += hs.emitted(reference, loader, loads)
        labels += [f"Config.load case {i} {case}" for i, case in enumerate(loads)]
        calls.append(hs.python_call(loader, loads, cpu=10))
    cases = [hs.Case(label, want=want) for label, want in zip(labels, wants, strict=True)]
    return hs.tests(
        answer=hs.python_calls(*calls),
        cases=cases,
        compare=hs.compare("equal"),
        limits=hs.limits(timeout=60),
        timeout=200,
    )
