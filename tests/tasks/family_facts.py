"""What the test modules ask of every generator family at collection time (which families need
a toolchain), worked out once a process: generating a task of each of the 38 families takes
seconds, and four test modules used to do it each while pytest collected them."""

from __future__ import annotations

import functools

from palaestra.tasks import generators as g


@functools.cache
def packages(family: str) -> tuple[str, ...]:
    """The Debian packages the family's image installs beside python3 (a toolchain)."""
    return tuple(g.generate(family, 0, 0.0).packages)


def python_families(category: str | None = None) -> list[str]:
    """The families of ``category`` (all by default) that need nothing but Python."""
    return [f.name for f in g.families(category) if not packages(f.name)]


def language_families() -> list[str]:
    """The families whose image installs a toolchain (C, Go, Rust, Node.js, PostgreSQL)."""
    return [f.name for f in g.families() if packages(f.name)]
