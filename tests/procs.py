"""Host-side process inspection for leak checks (reads /proc; no test doubles).

A test marks its processes with a random number in their command lines (``sleep <marker>``,
:func:`new_marker`); the host's /proc is scanned for it to prove that something is, or is no
longer, running."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import random
import socket
import time
import urllib.parse
from collections.abc import Callable

#: Run ids of backends made by sandbox tests start with this (unique per test process).
RUN_PREFIX = f"t{os.getpid()}"


def new_marker() -> str:
    return str(random.randrange(10**8, 10**9))


def host_pids(needle: str) -> list[int]:
    """Host pids (this process's excepted) whose command line contains ``needle``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if needle.encode() in cmdline:
            pids.append(int(entry))
    return pids


def bwrap_pids(needle: str) -> list[int]:
    """Host pids of bwrap processes whose command line contains ``needle``."""
    found = []
    for pid in host_pids(needle):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0]
        except OSError:
            continue
        if os.path.basename(argv0) == b"bwrap":
            found.append(pid)
    return found


async def eventually(condition: Callable[[], bool], within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, cmdline) for every process on the host."""
    procs: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        procs[int(entry)] = (ppid, cmdline)
    return procs


def sandbox_processes(marker: str | None = None) -> list[str]:
    """Command lines of every bwrap process and everything below one.

    ``marker``: only bwrap processes whose command line holds it (e.g. a state directory), so
    that a test ignores sandboxes of other processes sharing the host.
    """
    procs = _processes()
    roots = {
        pid
        for pid, (_, cmd) in procs.items()
        if cmd.split(" ", 1)[0].endswith("bwrap") and (marker is None or marker in cmd)
    }
    found: set[int] = set(roots)
    changed = True
    while changed:
        changed = False
        for pid, (ppid, _) in procs.items():
            if ppid in found and pid not in found:
                found.add(pid)
                changed = True
    return [procs[pid][1] for pid in sorted(found)]


def own_sandbox_processes() -> list[str]:
    """:func:`sandbox_processes` of the sandboxes this process's backends created."""
    from palaestra.sandbox import default_backend

    return sandbox_processes(
        str(default_backend("local").state_dir / default_backend("local").run_id)
    )


def descendants(root: int) -> list[str]:
    """Command lines of every process below ``root`` (not ``root`` itself)."""
    procs = _processes()
    found: set[int] = {root}
    changed = True
    while changed:
        changed = False
        for pid, (ppid, _) in procs.items():
            if ppid in found and pid not in found:
                found.add(pid)
                changed = True
    found.discard(root)
    return [procs[pid][1] for pid in sorted(found)]


def sandbox_cgroups(run_id_prefix: str) -> list[str]:
    """Sandbox cgroup directories (``.../palaestra/<run id>.<sandbox id>``) of matching runs,
    in every hierarchy (cgroup v1 controllers and v2)."""
    found = []
    for dirpath, dirnames, _ in os.walk("/sys/fs/cgroup"):
        if os.path.basename(dirpath) == "palaestra":
            found += [os.path.join(dirpath, d) for d in dirnames if d.startswith(run_id_prefix)]
            dirnames.clear()
        elif dirpath.count("/") > 12:
            dirnames.clear()
    return sorted(found)


def tmpfs_mounts_under(prefix: str) -> list[str]:
    """Mount points at or below ``prefix`` (sandbox disk quotas left mounted)."""
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    return [p for p in points if p == prefix or p.startswith(prefix.rstrip("/") + "/")]


#: The second engine scripts/provision-docker-remap.sh starts (userns-remap): its containers and
#: images are counted too.
REMAPPED_DOCKER_HOST = os.environ.get(
    "PALAESTRA_DOCKER_REMAP_HOST", "unix:///run/palaestra/docker-remap.sock"
)


def _engine_sockets() -> list[str]:
    """The unix sockets of the engines a test may use: ``$DOCKER_HOST``'s (or the default)
    and the remapped engine's, when there is one."""
    from palaestra.sandbox.docker import docker_socket

    try:
        sockets = [docker_socket()]
    except Exception:  # DOCKER_HOST not a unix socket: no containers to count there
        sockets = []
    remapped = REMAPPED_DOCKER_HOST.removeprefix("unix://")
    if remapped not in sockets and os.path.exists(remapped):
        sockets.append(remapped)
    return sockets


def _docker_get(path: str, socket_path: str) -> object | None:
    """GET ``path`` from the Docker engine at ``socket_path``, or None when none answers."""
    raw = _docker_get_raw(path, socket_path)
    try:
        return json.loads(raw) if raw is not None else None
    except ValueError:
        return None


def _docker_get_raw(path: str, socket_path: str) -> bytes | None:
    """The body of GET ``path`` from the engine at ``socket_path``; None when none answers."""

    class Conn(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(10)
            self.sock.connect(socket_path)

    conn = Conn("localhost", timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.read() if response.status == 200 else None
    except Exception:  # no engine there: no containers to count
        return None
    finally:
        conn.close()


def own_containers() -> list[str]:
    """palaestra containers made by this process or a process started below it (alive or
    ended), as ``<name> <owner>``; containers of unrelated live processes (another test run
    on the same engine) are left out."""
    return _owned(
        "containers", "palaestra.run_id", lambda c: c["Names"][0] if c.get("Names") else c["Id"]
    )


def own_snapshot_images() -> list[str]:
    """Snapshot images (tagged or not) made by this process or one started below it, as
    ``<id> <owner>``."""
    from palaestra.sandbox.docker_janitor import SNAPSHOT_LABEL

    return _owned("images", SNAPSHOT_LABEL, lambda i: i["Id"])


def _owned(kind: str, label: str, name: Callable[[dict], str]) -> list[str]:
    """The engines' ``kind`` (containers, images) carrying ``label`` that this process or one
    below it owns, as ``<name> <owner>``."""
    from palaestra.sandbox.docker_janitor import OWNER_LABEL

    found = []
    for socket_path in _engine_sockets():
        found += _listed(kind, label, socket_path)
    ours = _own_owner_labels()
    owners = [((item.get("Labels") or {}).get(OWNER_LABEL, ""), item) for item in found]
    return sorted(f"{name(item)} {owner}" for owner, item in owners if ours(owner))


#: (kind, label, engine socket) -> (when it was listed, what was listed)
_LISTINGS: dict[tuple[str, str, str], tuple[float, list[dict]]] = {}


def _listed(kind: str, label: str, socket_path: str) -> list[dict]:
    """The engine's ``kind`` carrying ``label``. Listing images costs the engine ~20-30 ms, a
    leak check lists twice a test: the last listing is reused while the engine reports no
    container or image event since it was made (one early second of margin: event times are
    the engine's, listings the host's; the same clock here), ~1 ms to ask."""
    key, now = (kind, label, socket_path), time.time()
    if key in _LISTINGS:
        at, items = _LISTINGS[key]
        filters = urllib.parse.quote(json.dumps({"type": ["container", "image"]}))
        events = _docker_get_raw(
            f"/events?since={at - 1.0:.3f}&until={now:.3f}&filters={filters}", socket_path
        )
        if events is not None and not events.strip():
            return items
    query = urllib.parse.quote(json.dumps({"label": [label]}))
    listed = _docker_get(f"/{kind}/json?all=1&filters={query}", socket_path)
    items = listed if isinstance(listed, list) else []
    _LISTINGS[key] = (now, items)
    return items


def _own_owner_labels() -> Callable[[str], bool]:
    """Whether a ``palaestra.owner`` label names this process or one started below it (alive
    or ended)."""
    from palaestra.sandbox.docker_janitor import owner_label

    me = owner_label()
    machine = me.rsplit("/", 2)[0]
    procs = _processes()

    def ours(label: str) -> bool:
        owner_machine, _, pid_text = label.rpartition("/")[0].rpartition("/")
        if owner_machine != machine or not pid_text.isdigit():
            return False
        pid = int(pid_text)
        if label == me:
            return True
        if pid not in procs:
            return True  # its owner ended (or was a child of ours that ended): a leftover
        while pid in procs and pid > 1:  # alive: ours only if it descends from this process
            pid = procs[pid][0]
            if pid == os.getpid():
                return True
        return False

    return ours
