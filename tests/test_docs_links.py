"""The docs hold together: every relative link of every Markdown file in the repository points at a
file that exists inside the repository and, into a Markdown file, at a heading it has; and no file
of the product names a path outside the repository or an issue number.

Links are read with markdown-it (the parser feedback.html uses), so code spans and code blocks are
not links; a heading's anchor is GitHub's (lower case, punctuation dropped, spaces as hyphens, a
repeated heading numbered ``-1``, ``-2``, …).
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[1]
# folders that are not the product: made by setup, builds, runs and tools (see .gitignore)
NOT_PRODUCT = {"node_modules", "build", "dist", "out", "demo-out", "__pycache__"}
_MD = MarkdownIt("commonmark", {"html": False}).enable("table")


def _product_files(suffix: str = "") -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [
            d
            for d in dirs
            if d not in NOT_PRODUCT and not d.endswith(".egg-info") and (not d.startswith(".") or d == ".ci")
        ]
        found += [Path(folder, f) for f in files if f.endswith(suffix)]
    return sorted(found)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    kept = "".join(c for c in heading.lower() if c in " -_" or unicodedata.category(c)[0] in "LNM")
    return kept.replace(" ", "-")


def _inline_text(token) -> str:
    return "".join(child.content for child in token.children or () if child.type in ("text", "code_inline"))


def anchors(markdown: str) -> set[str]:
    tokens = _MD.parse(markdown)
    seen: dict[str, int] = {}
    found = set()
    for i, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        base = slug(_inline_text(tokens[i + 1]))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(markdown: str) -> list[str]:
    out = []
    for token in _MD.parse(markdown):
        for child in token.children or ():
            if child.type == "link_open":
                out.append(child.attrGet("href"))
            elif child.type == "image":
                out.append(child.attrGet("src"))
    return [str(href) for href in out if href]


def broken_links(md_file: Path, root: Path) -> list[str]:
    """Every relative link of ``md_file`` that does not resolve, each with why."""
    problems = []
    text = md_file.read_text(encoding="utf-8")
    for href in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", href, re.I) or href.startswith("//"):
            continue  # http:, https:, mailto:: not ours to check here
        path_part, _, fragment = href.partition("#")
        target = (md_file.parent / unquote(path_part)).resolve() if path_part else md_file
        if path_part.startswith("/") or not target.is_relative_to(root.resolve()):
            problems.append(f"{href}: points outside the repository")
        elif not target.exists():
            problems.append(f"{href}: no such file")
        elif (
            fragment and target.suffix == ".md" and unquote(fragment) not in anchors(target.read_text(encoding="utf-8"))
        ):
            problems.append(f"{href}: {target.name} has no heading #{fragment}")
    return problems


MARKDOWN = _product_files(".md")


def test_the_repository_has_its_docs():
    names = {p.relative_to(ROOT).as_posix() for p in MARKDOWN}
    assert {
        "README.md",
        "SECURITY.md",
        "CHANGELOG.md",
        "CONTRIBUTING.md",
        "docs/ARCHITECTURE.md",
        "docs/ADDING-AN-ASSIGNMENT.md",
    } <= names


@pytest.mark.parametrize("md_file", MARKDOWN, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(md_file):
    assert broken_links(md_file, ROOT) == []


def test_every_page_under_docs_is_linked_from_the_readme():
    readme_targets = {
        (ROOT / unquote(h.partition("#")[0])).resolve() for h in links((ROOT / "README.md").read_text(encoding="utf-8"))
    }
    unlinked = [p.name for p in (ROOT / "docs").glob("*.md") if p.resolve() not in readme_targets]
    assert unlinked == []


# ── the checker itself: it must catch what it is for ─────────────────────────────────────────────


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Two commands", "two-commands"),
        ("Stage 3 · `grade.json`", "stage-3--gradejson"),
        ("Grading on a Dask cluster (`batch --scheduler`)", "grading-on-a-dask-cluster-batch---scheduler"),
        ("Gradescope's container (the fallback, end to end)", "gradescopes-container-the-fallback-end-to-end"),
        ("8. Which assignment a notebook is for", "8-which-assignment-a-notebook-is-for"),
        ("Attacks, defences, proofs", "attacks-defences-proofs"),
        ("rescore: new tolerances, no re-execution", "rescore-new-tolerances-no-re-execution"),
    ],
)
def test_anchors_are_githubs(heading, anchor):
    assert anchor in anchors(f"# {heading}\n")


def test_a_repeated_heading_gets_a_number():
    assert anchors("## Notes\n\n## Notes\n\n## Notes\n") == {"notes", "notes-1", "notes-2"}


@pytest.mark.parametrize(
    ("markdown", "broken"),
    [
        ("[a](missing.md)", True),
        ("[a](other.md)", False),
        ("[a](other.md#real-heading)", False),
        ("[a](other.md#no-such-heading)", True),
        ("[a](#here)", False),
        ("[a](#not-here)", True),
        ("![picture](missing.png)", True),
        ("[a](../outside.md)", True),
        ("[a](/etc/passwd)", True),
        ("[a](sub/)", False),
        ("[a](https://example.org/missing.md)", False),
        ("`[a](missing.md)` in code", False),
        ("```\n[a](missing.md)\n```", False),
    ],
)
def test_the_checker_finds_broken_links(tmp_path, markdown, broken):
    docs = tmp_path / "repo"
    (docs / "sub").mkdir(parents=True)
    (tmp_path / "outside.md").write_text("# x\n")  # exists, but outside the repository
    (docs / "other.md").write_text("# Real heading\n")
    page = docs / "page.md"
    page.write_text(f"# Here\n\n{markdown}\n")
    assert bool(broken_links(page, docs)) is broken, broken_links(page, docs)


# ── nothing names a path outside the repository or an issue number ───────────────────────────────

_TEXT_SUFFIXES = {
    ".py",
    ".md",
    ".toml",
    ".txt",
    ".sh",
    ".cfg",
    ".ini",
    ".json",
    ".ipynb",
    ".yml",
    ".yaml",
    ".html",
    ".j2",
    ".jinja",
    ".Dockerfile",
}
_TEXT_NAMES = {"Makefile", "run_autograder", "run"}
# This file is scanned too, so it spells the words it looks for in pieces: ISSUE is the word, W the
# shared folder's root.
ISSUE, W = "iss" + "ue", "/wo" + "rk/"
_OUTSIDE = re.compile(
    "|".join(
        [
            rf"\b{ISSUE}s?\s+#?\d",
            rf"\({ISSUE}\b",
            rf"\b{ISSUE}-\d",
            re.escape(W),
            r"\.\./" + "shared",
            "shared/" + "specs",
        ]
    ),
    re.IGNORECASE,
)


def _text_files() -> list[Path]:
    return [
        p
        for p in _product_files()
        if (p.suffix in _TEXT_SUFFIXES or p.name in _TEXT_NAMES) and p.stat().st_size < 5_000_000
    ]


def outside_references(text: str) -> list[str]:
    return [m.group(0) for m in _OUTSIDE.finditer(text)]


def test_nothing_names_an_issue_or_a_path_outside_the_repository():
    found = {
        p.relative_to(ROOT).as_posix(): hits
        for p in _text_files()
        if (hits := outside_references(p.read_text(encoding="utf-8", errors="replace")))
    }
    assert found == {}


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("fixed in {ISSUE} 13", True),
        ("{Cap} 15: gamed files", True),
        ("({ISSUE} NN)", True),
        ("see {ISSUE}s 12-16", True),
        ("branch {ISSUE}-26", True),
        ("the spec in {W}shared", True),
        ("../" + "shared/research", True),
        ("the shared/" + "specs folder", True),
        ("ONNX Runtime {ISSUE}s [#4349](https://github.com/microsoft/onnxruntime/{ISSUE}s/4349)", False),
        ("the {ISSUE} of memory", False),
        ("an {ISSUE}: none", False),
    ],
)
def test_the_outside_reference_rule(text, named):
    text = text.format(Cap=ISSUE.capitalize(), ISSUE=ISSUE, W=W)
    assert bool(outside_references(text)) is named
