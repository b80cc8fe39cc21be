#!/usr/bin/env python3
"""Drop from shipped swe-synth manifests the tasks whose test ids the image's interpreter names
otherwise (``palaestra.tasks.synth.portable``): such a task's oracle can never pass.

Manifests synthesised before the pipeline checked this are fixed here, once; the pipeline
drops them itself now. Each project is made ready as ``swe-synth/<project>`` is on first use
(sdist, venv, image), its original tests collected in a local sandbox of the image, and its
manifest rewritten without the tasks that name an id not collected (``stats.unportable_ids``
records how many). Run as root on a machine that can build the images::

    .venv/bin/python scripts/synth-portable-ids.py isodate        # some projects
    .venv/bin/python scripts/synth-portable-ids.py --all          # every shipped one
"""

from __future__ import annotations

import argparse
import sys

from palaestra.run.synth_ids import collect
from palaestra.tasks.synth.manifest import SHIPPED, Materialised, shipped, shipped_manifest
from palaestra.tasks.synth.portable import unportable


def fix(name: str, write: bool) -> int:
    manifest = shipped_manifest(name)
    project, image, _ = Materialised(manifest).prepare()
    dropped = set(unportable(manifest.tasks, collect(project, image)))
    print(f"{name}: {len(dropped)} of {len(manifest.tasks)} tasks name ids the image does not")
    if dropped and write:
        manifest.tasks = [b for b in manifest.tasks if b.id not in dropped]
        manifest.stats["unportable_ids"] = manifest.stats.get("unportable_ids", 0) + len(dropped)
        manifest.stats["kept"] = len(manifest.tasks)
        manifest.save(SHIPPED / f"{name}.json.gz")
    return len(dropped)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("projects", nargs="*")
    parser.add_argument("--all", action="store_true", help="every shipped manifest")
    parser.add_argument("--dry-run", action="store_true", help="report, change nothing")
    args = parser.parse_args()
    names = shipped() if args.all else args.projects
    unknown = sorted(set(names) - set(shipped()))
    if not names or unknown:
        print(f"error: name shipped projects ({', '.join(shipped())}) or --all", file=sys.stderr)
        return 2
    for name in names:
        fix(name, not args.dry_run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
