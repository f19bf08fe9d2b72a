"""The README is a front page and docs/ the manual: short, linked both ways, links that resolve.

What the pages' code prints is checked by ``tests/integration_tests/test_readme.py``; this
module checks their form, offline: the README's length, that it maps every page of ``docs/``
and every link of a page leads somewhere, that each page says up front whether it needs a
chat model, and that the pages name concepts a reader knows, not the project's history.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS, ROOT / "benchmarks" / "README.md"]
MAX_README_LINES = 300
FENCED = re.compile(r"^```.*?^```[ \t]*$", re.DOTALL | re.MULTILINE)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
HISTORY = {
    "a document number of the project's seeds": re.compile(r"\bseeds? ?\d{3}\b", re.IGNORECASE),
    "an issue number": re.compile(r"\bissues? #?\d+", re.IGNORECASE),
    "a target's verdict": re.compile(r"\bnot met\b|\bFAIL\b"),
    "a load average": re.compile(r"\bload average", re.IGNORECASE),
    "the project's rounds": re.compile(r"\b(this|last|previous) round\b", re.IGNORECASE),
}


def prose(text: str) -> str:
    """The text without fenced blocks and inline code, where links are not links."""
    return INLINE_CODE.sub("", FENCED.sub("", text))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lowercase, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a markdown text (repeated headings get -1, -2, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCED.sub("", text)):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(text: str) -> list[str]:
    return [t for t in LINK.findall(prose(text))
            if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.IGNORECASE)]


def broken_links(page: Path) -> list[str]:
    """The relative links of a page whose file or heading does not exist."""
    broken = []
    for target in relative_links(page.read_text("utf-8")):
        path, _, anchor = unquote(target).partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists():
            broken.append(target)
        elif anchor and where.suffix == ".md" and anchor not in anchors(where.read_text("utf-8")):
            broken.append(target)
    return broken


def test_the_readme_is_a_front_page() -> None:
    count = len(README.read_text("utf-8").splitlines())
    assert count <= MAX_README_LINES, f"README.md has {count} lines; move details to docs/"


def test_the_readme_maps_every_page_of_docs_and_only_pages_that_exist() -> None:
    assert DOCS, "docs/ has no pages"
    linked = {(README.parent / unquote(t).partition("#")[0]).resolve()
              for t in relative_links(README.read_text("utf-8"))
              if t.startswith("docs/") and t.partition("#")[0].endswith(".md")}
    assert {p.resolve() for p in DOCS} <= linked, "a docs/ page the README does not link"
    missing = sorted(str(p.relative_to(ROOT)) for p in linked if not p.exists())
    assert not missing, f"the README maps pages that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_every_page_says_at_its_top_whether_it_needs_a_chat_model(page: Path) -> None:
    top = "\n".join(page.read_text("utf-8").splitlines()[:6])
    assert "**Chat model:**" in top, f"{page.name}: say under the title what needs a chat model"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_name_concepts_not_the_projects_history(page: Path) -> None:
    text = page.read_text("utf-8")
    found = [f"{what}: {m.group(0)!r}" for what, rule in HISTORY.items()
             for m in rule.finditer(text)]
    assert not found, f"{page.relative_to(ROOT)}: {found}"


def test_the_retrieval_page_says_when_to_batch_adds() -> None:
    text = (ROOT / "docs" / "retrieval.md").read_text("utf-8")
    adding = text[text.index("## Adding memories"):]
    assert "stream.add_many(" in adding and "one store commit" in adding


# ------------------------------------------------------------ the checks themselves


def test_slugs_and_anchors_follow_githubs_rules() -> None:
    text = "# Retrieval quality\n## `bench_tuning.py`: weights learned\n## Notes\n## Notes\n" \
           "```\n# not a heading\n```\n## 检索 (中文)\n"
    assert anchors(text) == {"retrieval-quality", "bench_tuningpy-weights-learned", "notes",
                             "notes-1", "检索-中文"}


def test_broken_links_finds_missing_files_and_headings(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n## 第二节\n", "utf-8")
    page = tmp_path / "page.md"
    page.write_text("[a](other.md) [b](other.md#第二节) [c](missing.md) [d](other.md#nowhere)"
                    " [e](https://example.com/x) [f](#here) `[g](inside-code.md)`\n# Here\n",
                    "utf-8")
    assert broken_links(page) == ["missing.md", "other.md#nowhere"]


def test_history_rules_catch_what_they_name() -> None:
    caught = {what for what, rule in HISTORY.items()
              for text in ("as in seed 004", "issue 13's targets", "46.6 ms (not met)",
                           "load average 0.1", "last round's snapshot")
              if rule.search(text)}
    assert caught == set(HISTORY)
    assert not any(rule.search("a 1,000-memory issue of the store")
                   for rule in HISTORY.values())
