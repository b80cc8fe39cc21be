"""Runs a generated task's hidden tests (stdlib only, Python 3.8+; shipped in ``tests/``
beside ``palaestra_check.py``): ``python3 -E -s -S -B palaestra_launch.py test_hidden.py [args]``
runs the script as ``python3 -E -s -S -B test_hidden.py [args]`` would.

Before it reads the script, it forks the fork server of the checker's children
(:func:`palaestra_fork.prefork_server`): a fork of this fresh interpreter, which has read
nothing of the tests, instead of a second interpreter started later. The script then runs as
``__main__`` with its own directory first on ``sys.path``; the server is killed when it ends.
"""

import os
import sys

import palaestra_fork


def main():
    if len(sys.argv) < 2:
        sys.stderr.write("usage: python3 -E -s -S -B palaestra_launch.py SCRIPT [ARG...]\n")
        return 2
    palaestra_fork.prefork_server()
    try:
        script = sys.argv[1]
        with open(script, "rb") as f:
            source = f.read()
        sys.argv = sys.argv[1:]
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        main_module = type(sys)("__main__")
        main_module.__file__ = script
        main_module.__builtins__ = __builtins__
        sys.modules["__main__"] = main_module
        exec(compile(source, script, "exec", dont_inherit=True), main_module.__dict__)
    finally:
        palaestra_fork.stop_server()
    return 0


if __name__ == "__main__":
    sys.exit(main())
