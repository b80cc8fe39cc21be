"""Whether a proposed task's tests run agent code outside the jail (issue 29, item 5).

A proposal's tests run as root in the verifier. The agent's code (what the solver leaves under
``/app``) may run there only through the shipped checker's jail: ``palaestra_check.run_command``
/ ``run_python`` (as ``nobody``, in a fresh directory, its whole process tree accounted and
killed), which :func:`palaestra.tasks.proposal.write_proposal` ships in the ``tests/`` of
every proposal whose tests name it. Tests that only *read* what the solver wrote (``cat``, ``grep``, ``cmp``) run no
agent code and are fine.

"Outside the jail" is decided statically, per line of each test file, so a refusal names the
file, the line and the fix:

* a shell line that executes a path under ``/app`` (``/app/x``, ``./x`` after ``cd /app``),
  hands one to an interpreter (``python3 /app/x.py``, ``bash /app/run.sh``, ``source``/``.``,
  ``node``, ``perl``...), or runs a module or an import with ``/app`` on the path
  (``python3 -m pkg`` after ``cd /app``, ``PYTHONPATH=/app``, ``-c 'import ...'`` there);
* a Python line that starts a process or loads code by any other means than palaestra_check
  (``subprocess``, ``os.system``, ``os.exec*``, ``os.spawn*``, ``os.popen``, ``pty.spawn``,
  ``runpy``, ``importlib``, ``__import__``, ``exec``/``eval``/``compile`` of a file's text), or
  puts ``/app`` on ``sys.path``.

A test that runs the agent's code through ``palaestra_check`` (a Python test file started with
``python3 -E -s -S -B /tests/palaestra_launch.py /tests/test_x.py``) passes.
"""

from __future__ import annotations

import re

_INTERPRETERS = r"(?:python3?(?:\.\d+)?|bash|sh|dash|zsh|node|nodejs|perl|ruby|php|lua|Rscript)"
#: Where a shell command starts: a line's start, after a separator, or after a keyword or a
#: wrapper that runs the command that follows it.
_AT_COMMAND = (
    r"(?:^|[;&|(`{]|\$\(|\b(?:then|do|else|elif|if|while|until|exec|time|nohup|xargs)\s"
    r"|\b(?:env|timeout\s+\S+|nice|setsid|stdbuf\s+\S+)\s)"
)
_SHELL_RULES = (
    (
        re.compile(rf"\b{_INTERPRETERS}\b[^|;&\n]*?\s['\"]?/app\b"),
        "hands a file of /app to an interpreter",
    ),
    (
        re.compile(rf"{_AT_COMMAND}\s*(?:\w+=\S*\s+)*['\"]?/app/"),
        "executes a path under /app",
    ),
    (
        re.compile(rf"{_AT_COMMAND}\s*(?:source|\.)\s+['\"]?(?:/app/|\./)"),
        "sources a file of /app",
    ),
    (re.compile(r"\bPYTHONPATH=['\"]?[^\s'\"]*/app"), "puts /app on PYTHONPATH"),
)
#: After ``cd /app``: a relative program, ``-m`` or ``-c`` imports the agent's code.
_IN_APP = re.compile(r"\bcd\s+['\"]?/app/?['\"]?(?:\s|$|;|&)")
_RELATIVE = (
    (re.compile(rf"{_AT_COMMAND}\s*\./"), "executes a program of /app"),
    (re.compile(rf"\b{_INTERPRETERS}\b[^|;&\n]*?\s-(?:m|c)\b"), "imports code of /app"),
    (
        re.compile(rf"\b{_INTERPRETERS}\b\s+(?:-\S+\s+)*[\w./-]+\.(?:py|sh|js|pl|rb)\b"),
        "runs a file of /app",
    ),
)
_PYTHON_RULES = (
    (
        re.compile(
            r"\bsubprocess\b|\bos\.(?:system|popen|exec\w*|spawn\w*|posix_spawn\w*|fork)\b"
            r"|\bpty\.spawn\b|\bmultiprocessing\b"
        ),
        "starts a process outside palaestra_check",
    ),
    (
        re.compile(r"\brunpy\b|\bimportlib\b|__import__|(?<![\w.])(?:exec|eval|compile)\s*\("),
        "loads code outside palaestra_check",
    ),
    (
        re.compile(r"sys\.path\.(?:insert|append|extend)\([^)]*/app|sys\.path\s*\+?=.*?/app"),
        "puts /app on sys.path",
    ),
)
#: The shipped runtime's own files: they start the jail's processes themselves.
RUNTIME = frozenset(
    {
        "palaestra_check.py",
        "palaestra_fork.py",
        "palaestra_jail.py",
        "palaestra_zygote.py",
        "palaestra_launch.py",
        "palaestra_budget.py",
    }
)
_FIX = "run the agent's code only through palaestra_check.run_command / run_python"


def _is_python(name: str, text: str) -> bool:
    first = text.lstrip().split("\n", 1)[0]
    return name.endswith(".py") or (first.startswith("#!") and "python" in first)


def outside_the_jail(tests: dict[str, str]) -> list[str]:
    """One line per test file that runs agent code outside the jail (see the module's
    docstring), naming the file, the line and the fix; empty when none does."""
    problems = []
    for name, text in sorted(tests.items()):
        if name.rsplit("/", 1)[-1] in RUNTIME:
            continue
        found = _python_line(text) if _is_python(name, text) else _shell_line(text)
        if found is not None:
            number, line, why = found
            shown = line.strip()[:80]
            problems.append(
                f"tests/{name} line {number} {why} ({shown!r}): {_FIX} "
                "(tests/palaestra_check.py, shipped with the task)"
            )
    return problems


def _shell_line(text: str) -> tuple[int, str, str] | None:
    in_app = False
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0] if not line.lstrip().startswith("#!") else ""
        for rule, why in _SHELL_RULES:
            if rule.search(code):
                return number, line, why
        in_app = in_app or bool(_IN_APP.search(code))
        if in_app:
            for rule, why in _RELATIVE:
                if rule.search(code) and "palaestra_launch.py" not in code:
                    return number, line, why + " (after cd /app)"
    return None


def _python_line(text: str) -> tuple[int, str, str] | None:
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        for rule, why in _PYTHON_RULES:
            if rule.search(code):
                return number, line, why
    return None
