"""The README hands over to docs/: every relative link and #anchor between README.md, bench/README.md and
docs/**/*.md resolves, and the two READMEs stay short (README ≤ 200 lines, bench/README ≤ 150)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6}) +(.*?) *#*$")


def pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def prose(markdown: str) -> str:
    """The text outside fenced code blocks and code spans, where a link is a link."""
    markdown = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", markdown)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("*", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    found, seen = set(), {}
    for line in re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M).splitlines():
        heading = HEADING.match(line)
        if heading:
            slug = anchor(heading.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto: … are not between our pages
        path, _, fragment = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(ROOT)}: {target}"
        if not resolved.exists():
            broken.append(f"{where} (no such file)")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved.read_text()):
            broken.append(f"{where} (no such heading)")
    return broken


def test_every_link_between_the_docs_resolves():
    assert len(pages()) > 12, "README.md, bench/README.md and the docs/ pages"
    assert [broken for page in pages() for broken in broken_links(page)] == []


def test_a_broken_link_or_anchor_is_found(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n\n## Import speed\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#import-speed) [gone](missing.md) [bad](other.md#nowhere) [self](#a-b)\n"
        "`[code](missing.md)`\n\n## A, b\n"
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert broken_links(page) == [
            "page.md: missing.md (no such file)",
            "page.md: other.md#nowhere (no such heading)",
        ]
    finally:
        ROOT = saved


def test_github_anchors():
    assert anchor("Judge checks: what they mean and what they cannot prove") == (
        "judge-checks-what-they-mean-and-what-they-cannot-prove"
    )
    assert anchor("A quiet re-run on main, and what the third leg costs at 1,000 rows (2026-12-02)") == (
        "a-quiet-re-run-on-main-and-what-the-third-leg-costs-at-1000-rows-2026-12-02"
    )
    assert anchor("The GIN index on `search` (issue 19)") == "the-gin-index-on-search-issue-19"
    assert anchors("# T\n## Same\n## Same\n") == {"t", "same", "same-1"}


def test_the_readmes_stay_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
    assert len((ROOT / "bench" / "README.md").read_text().splitlines()) <= 150
