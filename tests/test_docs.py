"""The README and docs/ hold together: every relative link resolves, every #anchor names a
heading of its page, and the index (docs/README.md) links every page."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def _unfenced(text: str) -> str:
    return re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.S | re.M)


def _prose(text: str) -> str:
    """The text without fenced blocks and inline code, where brackets are not links."""
    return re.sub(r"(`+).+?\1", "", _unfenced(text), flags=re.S)


def anchors(text: str) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces to dashes, -1 -2 on repeats."""
    seen: dict[str, int] = {}
    ids = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", _unfenced(text), flags=re.M):
        heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        ids.add(slug if count == 0 else f"{slug}-{count}")
    ids.update(re.findall(r'<a\s+(?:name|id)="([^"]+)"', text))
    return ids


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    problems = []
    for target in LINK.findall(_prose(page.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        name = f"{page.relative_to(root)}: {target}"
        if not resolved.exists():
            problems.append(f"{name} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text()):
            problems.append(f"{name} (no heading #{anchor})")
    return problems


def test_every_relative_link_and_anchor_resolves() -> None:
    problems = [problem for page in PAGES for problem in broken_links(page)]
    assert problems == []


def test_the_docs_index_links_every_page_once() -> None:
    index = ROOT / "docs" / "README.md"
    linked = [target.partition("#")[0] for target in LINK.findall(_prose(index.read_text()))]
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name != "README.md")
    assert sorted(t for t in linked if t.endswith(".md") and "/" not in t) == pages


def test_the_checker_sees_a_broken_link_and_a_missing_anchor(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A page\n\n## The `make` step\n\ntext\n")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#the-make-step) [gone](nope.md) [no anchor](a.md#missing)\n"
        "`[not a link](x.md)` [web](https://example.com/x.md)\n"
    )
    assert broken_links(page, tmp_path) == [
        "b.md: nope.md (no such file)",
        "b.md: a.md#missing (no heading #missing)",
    ]


def test_the_readme_is_short() -> None:
    """A newcomer reads it in five minutes: the feature catalogue lives in docs/."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150
