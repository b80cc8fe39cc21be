"""The instruction of a synthesised task: the symptom, as a user would report it in an issue.

What the user ran (one failing test, by its pytest id), what happened (the assertion or error
lines pytest printed, ``E ...``), what was expected (the test passes), and how many other tests
fail. Never the diff, the mutated line, or the file or module that was changed: lines of the
output that name the changed file are left out. A writer policy (``--writer openai:MODEL``) may
rewrite the text; it gets the same facts and nothing more.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_MAX_LINES = 25
_MAX_OTHERS = 5

#: Rewrites an instruction (the ``--writer`` policy); must keep to the facts it is given.
Rewriter = Callable[[str], str]

REWRITE_PROMPT = """\
Rewrite this bug report as a user of the library would file it as a GitHub issue: what they
ran, what happened, what they expected. Keep the exact test command and the error lines. Do
not guess where the bug is and do not name any source file. Answer with the issue's text only.

{instruction}"""


def forbidden(changed: list[str], import_root: str) -> list[str]:
    """Strings that would give the changed files away: their paths, names and module names
    (a package's ``__init__.py`` is named by its package, which every error names: kept)."""
    words: set[str] = set()
    for path in changed:
        rel = path.removeprefix(import_root + "/") if import_root else path
        words |= {path, rel}
        name = rel.rsplit("/", 1)[-1]
        if name != "__init__.py":
            words.add(name)
            words.add(rel.removesuffix(".py").replace("/", "."))
    return sorted(words, key=len, reverse=True)


def _names(text: str, word: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(word)}(?![\w])", text) is not None


def symptom(message: str, words: list[str]) -> str:
    """The error lines of a failure with every line naming a changed file left out."""
    lines = []
    for line in message.splitlines():
        text = re.sub(r"^E ?", "", line).rstrip()
        if any(_names(text, w) for w in words):
            continue
        lines.append(text)
    while lines and not lines[-1].strip():
        lines.pop()
    if len(lines) > _MAX_LINES:
        lines = lines[:_MAX_LINES] + ["..."]
    return "\n".join(lines).strip() or "(the test fails; pytest printed no assertion message)"


def render(
    project: str, version: str, failing: list[str], messages: dict[str, str], words: list[str]
) -> str:
    """The template instruction."""
    shown = next((t for t in failing if messages.get(t)), failing[0])
    others = [t for t in failing if t != shown]
    text = [
        f"# {project} {version}: `{shown.split('::')[-1]}` fails",
        "",
        f"I'm working on {project} (version {version}, checked out in `/app`). Its test "
        "suite used to pass, but now this test fails:",
        "",
        "```",
        f"cd /app && python -m pytest '{shown}'",
        "```",
        "",
        "What happened:",
        "",
        "```",
        symptom(messages.get(shown, ""), words),
        "```",
        "",
        "What I expected: the test passes, as it does in the released version.",
    ]
    if others:
        listed = "\n".join(f"- `{t}`" for t in others[:_MAX_OTHERS])
        more = f"\n- ... and {len(others) - _MAX_OTHERS} more" if len(others) > _MAX_OTHERS else ""
        text += ["", f"These fail too:\n\n{listed}{more}"]
    text += [
        "",
        "Please find the bug in the library's code and fix it. Don't change the tests: they are "
        "restored before grading, which runs these tests and more of the suite, all of which "
        "must pass. There is no network access; the project's dependencies and pytest are "
        "installed.",
    ]
    return "\n".join(text) + "\n"


def leaks(text: str, words: list[str], original_lines: list[str]) -> str | None:
    """What in ``text`` gives the answer away (a changed file's name, an original line), or
    None: a rewritten instruction is checked with it before it is used."""
    for word in words:
        if _names(text, word):
            return word
    for line in original_lines:
        if len(line.strip()) > 8 and line.strip() in text:
            return line.strip()
    return None


def unusable(text: str, failing: list[str]) -> str | None:
    """Why a rewritten instruction cannot replace the template (empty, or quoting no failing
    test's id, so the agent is not told what to run: SmolLM2-135M answered with a made-up
    Python file naming only a test function), or None."""
    if not text.strip():
        return "is empty"
    if not any(test in text for test in failing):
        return "quotes no failing test's id"
    return None
