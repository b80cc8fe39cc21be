"""Runs a generated task's hidden tests (stdlib only, Python 3.8+; shipped in ``tests/``
beside ``palaestra_check.py``): ``python3 -E -s -S -B palaestra_launch.py test_hidden.py [args]``
runs the script as ``python3 -E -s -S -B test_hidden.py [args]`` would; with ``--alarm SECONDS``
first, the checker is killed (SIGALRM, status 142) once they passed, as ``timeout`` would,
and the agent's runs are bounded to end before it (``palaestra_budget``).

Before it reads the script, it forks the fork server of the checker's children
(:func:`palaestra_fork.prefork_server`): a fork of this fresh interpreter, which has read
nothing of the tests, instead of a second interpreter started later. The script then runs as
``__main__`` with its own directory first on ``sys.path``; the server is killed when it ends.
Generated tasks ship the bytecode of their ``tests/*.py`` (``base.write_bytecode``): the
script's is used here as imports use the others'.
"""

import os
import sys

import palaestra_budget
import palaestra_fork


def _loader():
    """The loader of source files, as imports use it: it takes the script's hash-checked
    bytecode in ``__pycache__`` when the task ships one for this version and it matches the
    source byte for byte, else compiles the source (``-B``: nothing is written)."""
    try:  # importlib's own, already loaded: importlib.machinery would import warnings
        return sys.modules["_frozen_importlib_external"].SourceFileLoader
    except (KeyError, AttributeError):
        from importlib.machinery import SourceFileLoader

        return SourceFileLoader


def main():
    args = sys.argv[1:]
    if args[:1] == ["--alarm"] and len(args) >= 2 and args[1].isdigit():
        import _signal  # not signal: its enums import enum and re

        _signal.alarm(int(args[1]))  # SIGALRM ends this process (status 142), not its forks
        palaestra_budget.arm(int(args[1]))  # the agent's runs end in time for a verdict
        args = args[2:]
    if not args:
        sys.stderr.write(
            "usage: python3 -E -s -S -B palaestra_launch.py [--alarm SECONDS] SCRIPT [ARG...]\n"
        )
        return 2
    palaestra_fork.prefork_server()
    try:
        script = args[0]
        code = _loader()("__main__", script).get_code("__main__")
        sys.argv = args
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        main_module = type(sys)("__main__")
        main_module.__file__ = script
        main_module.__builtins__ = __builtins__
        sys.modules["__main__"] = main_module
        exec(code, main_module.__dict__)
    finally:
        palaestra_fork.stop_server()
    return 0


if __name__ == "__main__":
    sys.exit(main())
