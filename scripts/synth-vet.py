#!/usr/bin/env python3
"""Drop from shipped swe-synth manifests the tasks that fail where their verifier runs
(``palaestra.run.synth_vet``): tests whose ids the image's interpreter names otherwise, or that
do not all pass on the original source when run alone, as the verifier runs them. Such a
task's oracle can never pass.

Manifests synthesised before the pipeline vetted its tasks are fixed here, once; the pipeline
drops them itself now. Each project is made ready as ``swe-synth/<project>`` is on first use
(sdist, venv, image), each task's tests run in a local sandbox of the image, and its manifest
rewritten without the tasks that fail (``stats.dropped_in_image`` counts them by reason). Run
as root on a machine that can build the images::

    .venv/bin/python scripts/synth-vet.py isodate pathspec      # some projects
    .venv/bin/python scripts/synth-vet.py --all --dry-run       # report on every shipped one
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from palaestra.run.synth_vet import vet
from palaestra.tasks.synth.manifest import SHIPPED, Materialised, shipped, shipped_manifest


def fix(name: str, write: bool) -> int:
    manifest = shipped_manifest(name)
    project, image, _ = Materialised(manifest).prepare()
    vetoed = vet(project, image, manifest.tasks)
    why = dict(Counter(vetoed.values()))
    print(f"{name}: {len(vetoed)} of {len(manifest.tasks)} tasks fail in the image {why}")
    if vetoed and write:
        manifest.tasks = [b for b in manifest.tasks if b.id not in vetoed]
        merged = Counter(manifest.stats.get("dropped_in_image") or {}) + Counter(vetoed.values())
        manifest.stats["dropped_in_image"] = dict(merged)
        manifest.stats["kept"] = len(manifest.tasks)
        manifest.save(SHIPPED / f"{name}.json.gz")
    return len(vetoed)


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
