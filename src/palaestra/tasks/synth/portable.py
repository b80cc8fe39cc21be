"""Test ids as the verifier's interpreter names them (a task is kept only when they match).

A parametrised test's id may hold an index in an order the interpreter's binary decides: a set
of tuples holding ``None`` or a builtin type iterates in an order of their hashes, which on
CPython before 3.12 are those objects' addresses, fixed by the binary's layout. The baseline
runs on the host's ``/usr/bin/python3``; the verifier on the image's, which is another build of
the same version (Debian's point releases): isodate's ``test_parse[4-1985-04-expected8-%Y-%m]``
on one is ``...-expected23-...`` on the other, and a task whose tests name it can never pass
(``not run``). ``palaestra.run.synth_ids.collected`` lists what pytest collects from the
original source in the project's own image, as the verifier runs it (a sandbox: above this
layer, so the pipeline is handed it, ``Options.collect``); :func:`unportable` gives the bugs
whose tests name an id it does not, which the pipeline drops (and
``scripts/synth-portable-ids.py`` from the shipped manifests).
"""

from __future__ import annotations

from collections.abc import Iterable


def unportable(bugs: Iterable, ids: set[str]) -> list[str]:
    """The ids of ``bugs`` (``manifest.Bug``) whose tests name an id not in ``ids``."""
    return [b.id for b in bugs if not set(b.fail_to_pass) | set(b.pass_to_pass) <= ids]
