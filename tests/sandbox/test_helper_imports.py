"""The helper's start-up import budget: every sandbox's start pays for what it imports
(``main`` first makes the helper undumpable: a prctl, through ``_ctypes``)."""

from __future__ import annotations

import subprocess

from palaestra.sandbox.helper_runtime import helper_runtime

#: Stdlib modules that each cost a sandbox's start a millisecond or more (see _helper/__init__).
HEAVY = ("ctypes", "json", "signal", "subprocess", "selectors", "typing", "enum", "re")


def test_the_helper_imports_no_heavy_module() -> None:
    runtime = helper_runtime()
    probe = (
        f"import sys; sys.path.insert(0, {str(runtime)!r}); "
        "from _helper.server import _make_undumpable; _make_undumpable(); "
        "print(' '.join(sorted(sys.modules)))"
    )
    argv = [str(runtime / "ld.so"), "--library-path", str(runtime / "so")]
    argv += [str(runtime / "bin" / "python3"), "-I", "-S", "-B", "-c", probe]
    loaded = set(subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split())
    assert {"_helper.server", "_helper.shell", "_ctypes"} <= loaded  # what main() loads first
    assert not loaded.intersection(HEAVY), loaded.intersection(HEAVY)
