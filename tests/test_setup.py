"""`make setup`'s torch step (scripts/install-torch.sh): an index that does not answer costs one
request, not pip's minutes of retries, and an installed requirement asks no index at all.

Real pip into a real venv; the package is a tiny wheel written here (torch itself is several
hundred MB), the "unreachable" CPU index a local HTTP server that answers 503 and counts."""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import subprocess
import threading
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "install-torch.sh"


def _write_wheel(directory: Path, name: str, version: str) -> None:
    """A minimal pure-Python wheel (one module), as a build backend would write it."""
    dist = f"{name}-{version}"
    files = {
        f"{name}.py": b"VALUE = 1\n",
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}.dist-info/RECORD,,")
    with zipfile.ZipFile(directory / f"{dist}-py3-none-any.whl", "w") as wheel:
        for path, data in files.items():
            wheel.writestr(path, data)
        wheel.writestr(f"{dist}.dist-info/RECORD", "\n".join(record) + "\n")


class _Unavailable(http.server.BaseHTTPRequestHandler):
    requests: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        type(self).requests.append(self.path)
        self.send_error(503)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def unavailable_index() -> Iterator[tuple[str, list[str]]]:
    handler = type("Handler", (_Unavailable,), {"requests": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/", handler.requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def pip_env(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A fresh venv, and an environment whose "configured index" holds the test wheel only."""
    venv.create(tmp_path / "venv", with_pip=True)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _write_wheel(wheels, "newcomer_probe", "1.0")
    env = {
        **os.environ,
        "PIP_CONFIG_FILE": os.devnull,  # this machine's pip.conf (mirrors) plays no part
        "PIP_INDEX_URL": wheels.as_uri(),
        "PIP_FIND_LINKS": str(wheels),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    return tmp_path / "venv" / "bin" / "python", env


def _run(python: Path, index: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), str(python), index, "newcomer_probe==1.0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _installed(python: Path) -> str:
    code = "import importlib.metadata as m; print(m.version('newcomer_probe'))"
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True).stdout.strip()


@pytest.mark.slow
def test_an_unreachable_index_is_asked_once_then_the_configured_index_installs(
    pip_env: tuple[Path, dict[str, str]], unavailable_index: tuple[str, list[str]]
) -> None:
    python, env = pip_env
    url, requests = unavailable_index
    proc = _run(python, url, env)
    assert proc.returncode == 0, proc.stderr
    # the probe, and nothing else: `pip install --index-url` asks six times for every package
    assert requests == ["/simple/"]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("install-torch:")]
    assert len(lines) == 1 and f"{url} did not answer in 3 s" in lines[0]
    assert "TORCH_INDEX" in lines[0]
    assert _installed(python) == "1.0"


@pytest.mark.slow
def test_an_installed_requirement_asks_no_index(
    pip_env: tuple[Path, dict[str, str]], unavailable_index: tuple[str, list[str]]
) -> None:
    python, env = pip_env
    url, requests = unavailable_index
    assert _run(python, url, env).returncode == 0
    requests.clear()
    proc = _run(python, url, env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "install-torch: newcomer_probe==1.0 already installed"
    assert requests == []


def test_the_makefile_installs_torch_through_the_script() -> None:
    recipe = (ROOT / "Makefile").read_text()
    assert "./scripts/install-torch.sh $(BIN)/python '$(TORCH_INDEX)'" in recipe
    assert "--index-url $(TORCH_INDEX)" not in recipe


def test_usage_error_is_one_line_and_exit_code_2() -> None:
    proc = subprocess.run([str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
