"""Wrong solutions that attack the checker instead of solving (issue 29, item 6).

Each is Python source a family puts into one of its wrong solutions, so that ``palaestra tasks
check`` proves the jail (``palaestra_jail``) holds for that family: the attack must score
below 1.

* :func:`fork_relay`: a solution too slow for its CPU bar that forks before each process reaches
  its ``RLIMIT_CPU`` (a fork starts with a fresh CPU clock; the parent waits and exits as its
  child). The bar is over the whole process tree: it fails.
* :data:`SWAP_REFERENCE`: run on import, it copies the agent's own package over every copy of
  it it can write under ``/tmp`` (where a checker kept its reference): a reference run from there
  after the agent's code would answer as the agent does. References are read-only and run
  first: it fails on its own wrong answers.
* :data:`PLANT_IN_OUTPUT`: a program's output files made a FIFO (the checker would block on it)
  and a link to a root-only file (the checker would read it): both are a failed check.
"""

from __future__ import annotations

import re

#: Module prelude: ``_relay()`` hands the work to a fork once this process used 0.5 s of CPU.
RELAY = """
import os as _relay_os
import time as _relay_time


def _relay(every=0.5):
    # a fork's CPU clock starts at zero: the parent waits and exits with its child's status
    if _relay_time.process_time() > every:
        pid = _relay_os.fork()
        if pid:
            _, status = _relay_os.waitpid(pid, 0)
            _relay_os._exit(_relay_os.waitstatus_to_exitcode(status))
"""

_LOOP = re.compile(r"^(?P<indent>[ \t]*)(?:for|while)\b.*:[ \t]*$")


def fork_relay(source: str) -> str:
    """``source`` (a module) with :data:`RELAY` first and ``_relay()`` first in every loop."""
    out = []
    lines = source.splitlines()
    for i, line in enumerate(lines):
        out.append(line)
        if (m := _LOOP.match(line)) is not None:
            body = next((b for b in lines[i + 1 :] if b.strip()), "")
            indent = body[: len(body) - len(body.lstrip())] or m["indent"] + "    "
            out.append(f"{indent}_relay()")
    return RELAY + "\n" + "\n".join(out) + "\n"


#: Module prelude: copy the agent's top-level package or module (the one this file is in) over
#: every same-named copy a run could write under /tmp; errors are ignored.
SWAP_REFERENCE = """
def _swap_reference():
    import os, shutil
    here = os.path.dirname(os.path.abspath(__file__))
    top = here if os.path.isfile(os.path.join(here, "__init__.py")) else os.path.abspath(__file__)
    while os.path.isfile(os.path.join(os.path.dirname(top), "__init__.py")):
        top = os.path.dirname(top)
    name = os.path.basename(top)
    for root, dirs, files in os.walk("/tmp"):
        if root.count(os.sep) > 4:
            dirs[:] = []
            continue
        if name in dirs + files and os.path.join(root, name) != top:
            try:
                if os.path.isdir(top):
                    shutil.copytree(top, os.path.join(root, name), dirs_exist_ok=True)
                else:
                    shutil.copyfile(top, os.path.join(root, name))
            except OSError:
                pass


_swap_reference()
"""

#: Python statements for a program whose outputs are files: ``_plant(path)`` makes ``path`` a
#: FIFO when its name sorts first among the outputs, else a link to a root-only file.
PLANT_IN_OUTPUT = """
def _plant(path, first):
    import os
    try:
        os.unlink(path)
    except OSError:
        pass
    try:
        if first:
            os.mkfifo(path)
        else:
            os.symlink("/tests/test.sh", path)
    except OSError:
        pass
"""
