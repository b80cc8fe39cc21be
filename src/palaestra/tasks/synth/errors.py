"""The one error of synthesis: bad input or a project that cannot be used, with the fix."""

from __future__ import annotations


class SynthError(ValueError):
    """A project that cannot become tasks (unknown package, no sdist, no tests, C extensions,
    a suite that does not run offline...): ``str()`` is one line naming the problem and the fix."""

    def __init__(self, problem: str, *, fix: str = "") -> None:
        self.problem, self.fix = problem, fix
        super().__init__(f"{problem}. Fix: {fix}" if fix else problem)
