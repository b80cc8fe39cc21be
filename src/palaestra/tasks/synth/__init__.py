"""SWE-style bug-fix tasks synthesised offline from real Python projects (docs/swe-synth.md).

``palaestra tasks synth SOURCE -o DIR`` (:mod:`.pipeline`) turns a PyPI project's sdist, or a
local git directory, into Harbor tasks: its environment built once (:mod:`.environment`), its
suite run twice for the reliable tests (:mod:`.testrun`), bugs injected by AST mutation
(:mod:`.mutators`, :mod:`.edits`) and kept when a test fails (:mod:`.validate`), each written as
a task (:mod:`.instruction`, :mod:`.writer`) and listed in a compact manifest
(:mod:`.manifest`) from which ``swe-synth/<project>`` makes them again on first use.
"""

from palaestra.tasks.synth.errors import SynthError

__all__ = ["SynthError"]
