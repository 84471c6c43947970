"""The core never names an assignment: a new lesson is a new folder, not an edit of autograder/.

Every id under assignments/ (and its notebook's name) is searched for in every file of the
package, case-insensitively. ONNX's own operator names (QuantizeLinear, …) are not ids and are fine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.assignment import assignment_ids, load_assignment

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "autograder"
IDS = assignment_ids(ROOT)


def package_files(package: Path = PACKAGE) -> list[Path]:
    return sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def occurrences(files: list[Path], names: set[str], root: Path) -> list[str]:
    """``path:line: text`` of every line of ``files`` that contains one of ``names`` (any case)."""
    hits = []
    for path in files:
        text = path.read_bytes().decode("utf-8", "replace")
        for lineno, line in enumerate(text.splitlines(), start=1):
            if any(name.lower() in line.lower() for name in names):
                hits.append(f"{path.relative_to(root)}:{lineno}: {line.strip()[:100]}")
    return hits


def test_the_tree_holds_at_least_two_assignments():
    assert len(IDS) >= 2, f"expected a second assignment beside the first, found {IDS}"


@pytest.mark.parametrize("assignment_id", IDS)
def test_no_package_file_names_the_assignment(assignment_id):
    names = {assignment_id, load_assignment(assignment_id, ROOT).notebook.stem}
    hits = occurrences(package_files(), names, ROOT)
    assert not hits, f"autograder/ names assignment {assignment_id}:\n" + "\n".join(hits)


def test_the_scan_finds_a_planted_id(tmp_path):
    package = tmp_path / "autograder"
    (package / "sub").mkdir(parents=True)
    (package / "clean.py").write_text('"""QuantizeLinear is an ONNX operator, not an assignment."""\n')
    (package / "sub" / "default.py").write_text(f'DEFAULT = "{IDS[0].upper()}"\n')
    assert occurrences(package_files(package), {IDS[0]}, tmp_path) == [
        f'autograder/sub/default.py:1: DEFAULT = "{IDS[0].upper()}"'
    ]
