"""One rule picks the notebook of a submission folder (autograder/notebook_choice.py): the same
folder gives the same choice, and the same reason, in ``gradescope run`` (a folder), in the export
reader of ``batch`` (a zip, and the same export unpacked), and in the rule itself. A table of
folder shapes; nothing is graded here (the real grading of an export with a second notebook is
in tests/gradescope/test_gradescope_export_regrade.py)."""

from __future__ import annotations

import os
import stat
import zipfile
from pathlib import Path

import pytest

from autograder.batch.sources import discover
from autograder.gradescope.run import find_notebook
from autograder.notebook_choice import choose_notebook

PREFERRED = "hw.ipynb"
NB = '{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}'
LINK = object()  # a symbolic link to a notebook file outside the folder

# files of one submission folder -> (the chosen path or None, a fragment of the message)
SHAPES = {
    "one notebook": ({"work.ipynb": NB}, "work.ipynb", ""),
    "the assignment's name": ({PREFERRED: NB}, PREFERRED, ""),
    "assignment's name and a second notebook": (
        {PREFERRED: NB, "my_work.ipynb": NB},
        PREFERRED,
        "Your submission has 2 notebooks; graded hw.ipynb, ignored my_work.ipynb.",
    ),
    "assignment's name in a subfolder": (
        {"sub/hw.ipynb": NB, "scratch.ipynb": NB},
        "sub/hw.ipynb",
        "ignored scratch.ipynb",
    ),
    "two notebooks, neither named": (
        {"a.ipynb": NB, "b.ipynb": NB},
        None,
        "2 notebooks (a.ipynb, b.ipynb), and the grader cannot tell which one",
    ),
    "the assignment's name twice": ({PREFERRED: NB, "sub/hw.ipynb": NB}, None, "2 notebooks (hw.ipynb, sub/hw.ipynb)"),
    "the name in another case": ({"HW.ipynb": NB, "x.ipynb": NB}, None, "name the one to grade hw.ipynb."),
    "an upper-case suffix": ({"WORK.IPYNB": NB}, "WORK.IPYNB", ""),
    "no notebook": ({"notes.txt": "hi", "model.onnx": "x"}, None, "It holds model.onnx, notes.txt."),
    "empty": ({}, None, "It is empty."),
    "checkpoints are ignored": ({".ipynb_checkpoints/hw-checkpoint.ipynb": NB, "work.ipynb": NB}, "work.ipynb", ""),
    "hidden files are ignored": ({".hw.ipynb": NB, "work.ipynb": NB}, "work.ipynb", ""),
    "__MACOSX is ignored": ({"__MACOSX/._work.ipynb": NB, "work.ipynb": NB}, "work.ipynb", ""),
    "a symlink is never graded": ({"link.ipynb": LINK, "work.ipynb": NB}, "work.ipynb", ""),
    "only a symlink": ({"link.ipynb": LINK}, None, "link.ipynb is a symbolic link, not a notebook file."),
    "nine notebooks": ({f"n{i}.ipynb": NB for i in range(9)}, None, "n7.ipynb and 1 more"),
}


def _folder(root: Path, files: dict, outside: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is LINK:
            path.symlink_to(outside)
        else:
            path.write_text(content)
    return root


def _zip(path: Path, files: dict) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("export/submission_metadata.yml", "submission_1:\n  :submitters: []\n")
        zf.writestr("export/submission_1/", b"")
        for rel, content in files.items():
            if content is LINK:
                info = zipfile.ZipInfo(f"export/submission_1/{rel}")
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
                zf.writestr(info, "/etc/passwd")
            else:
                zf.writestr(f"export/submission_1/{rel}", content)
    return path


def _export_choice(source: Path, staging: Path) -> tuple[str | None, str]:
    (sub,) = discover(source, staging, PREFERRED).submissions
    if sub.notebook is None:
        return None, sub.problem or ""
    return sub.origin.split("submission_1/", 1)[1], ""


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_front_end_picks_the_same_notebook_with_the_same_reason(tmp_path, shape):
    files, chosen, fragment = SHAPES[shape]
    outside = tmp_path / "outside.ipynb"
    outside.write_text(NB)
    rule = choose_notebook([(rel, content is not LINK) for rel, content in files.items()], PREFERRED)
    assert rule.chosen == chosen and fragment in rule.message, rule

    gradescope = find_notebook(_folder(tmp_path / "gs" / "submission", files, outside), PREFERRED)
    zipped = _export_choice(_zip(tmp_path / "export.zip", files), tmp_path / "staging-zip")
    _folder(tmp_path / "unpacked" / "export" / "submission_1", files, outside)
    (tmp_path / "unpacked" / "export" / "submission_metadata.yml").write_text("submission_1:\n  :submitters: []\n")
    unpacked = _export_choice(tmp_path / "unpacked", tmp_path / "staging-dir")
    assert (gradescope.chosen, gradescope.message if chosen is None else "") == (
        rule.chosen,
        "" if chosen else rule.message,
    )
    assert zipped == unpacked == (rule.chosen, "" if chosen else rule.message), (zipped, unpacked)
    assert "`" not in rule.message, "plain text: each front end escapes it for its output"


def test_an_export_with_a_second_notebook_stages_the_assignments_one_and_says_so(tmp_path):
    archive = _zip(
        tmp_path / "export.zip",
        {
            PREFERRED: NB.replace("[]}", '[{"cell_type": "markdown", "source": "the one", "metadata": {}}]}'),
            "my_work.ipynb": NB,
        },
    )
    found = discover(archive, tmp_path / "staging", PREFERRED)
    (sub,) = found.submissions
    assert sub.problem is None and "the one" in sub.notebook.read_text()
    assert any(
        w == "submission_1: Your submission has 2 notebooks; graded hw.ipynb, ignored my_work.ipynb."
        for w in found.warnings
    ), found.warnings


def test_a_folder_of_plain_notebooks_is_still_one_submission_each(tmp_path):
    """The rule is for a submission folder; a flat folder of notebooks is a class, one each."""
    for name in (PREFERRED, "my_work.ipynb"):
        (tmp_path / "class" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "class" / name).write_text(NB)
    found = discover(tmp_path / "class", tmp_path / "staging", PREFERRED)
    assert sorted(s.name for s in found.submissions) == ["hw", "my_work"]
    assert os.path.isdir(tmp_path / "staging")
