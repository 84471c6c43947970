"""Finding submissions: folders of notebooks, Gradescope export zips (and unpacked exports)."""

from __future__ import annotations

import json
import os
import stat
import zipfile
from pathlib import Path

import pytest
import yaml
from batchkit import make_export_zip, notebook_json

from autograder.batch.sources import (
    SourceError,
    discover,
    iso_time,
    parse_metadata,
    parse_submission_times,
    sanitize_name,
)

METADATA = """\
submission_101:
  :submitters:
  - :name: Ada Lovelace
    :sid: '1815'
    :email: ada@example.edu
  :created_at: 2024-03-01 10:00:00.000000000 -08:00
  :score: 12.0
  :status: processed
  :results:
    score: 12.0
    tests: []
  :history: []
submission_102:
  :submitters:
  - :name: Grace Hopper
    :sid: 1906
    :email: grace@example.edu
  - :name: Alan Turing
    :sid: '1912'
    :email: alan@example.edu
submission_103:
  :submitters:
  - :name: "=HYPERLINK(\\"http://x\\")"
    :sid: '7'
    :email: m@example.edu
"""


def test_parse_metadata_strips_ruby_symbol_colons():
    meta = parse_metadata(METADATA)
    assert meta["submission_101"] == [{"name": "Ada Lovelace", "sid": "1815", "email": "ada@example.edu"}]
    assert [p["name"] for p in meta["submission_102"]] == ["Grace Hopper", "Alan Turing"]
    assert meta["submission_102"][0]["sid"] == "1906", "an unquoted sid is still a string"


def test_parse_metadata_loads_ruby_tags_as_plain_data():
    text = (
        "submission_5: !ruby/hash:ActiveSupport::HashWithIndifferentAccess\n"
        "  :submitters:\n  - !ruby/object:User\n    :name: Tagged Person\n    :sid: '5'\n"
        "  :created_at: !ruby/object:ActiveSupport::TimeWithZone 2024-01-01\n"
    )
    assert parse_metadata(text) == {"submission_5": [{"name": "Tagged Person", "sid": "5", "email": ""}]}


@pytest.mark.parametrize("text", ["- just\n- a list\n", "key: [unclosed\n", "!!python/object:os.system x\n"])
def test_parse_metadata_rejects_what_is_not_a_mapping_of_submissions(text):
    with pytest.raises((ValueError, yaml.YAMLError)):
        parse_metadata(text)


@pytest.mark.parametrize(
    "stem,expected",
    [
        ("alice", "alice"),
        ("Ada Lovelace (final)", "Ada_Lovelace_final"),
        ("../../etc/passwd", "etc_passwd"),
        ("...", "submission"),
        ("gradebook.csv", "submission_gradebook.csv"),
        ("ünïcode名", "n_code"),
    ],
)
def test_sanitize_name(stem, expected):
    assert sanitize_name(stem) == expected


def test_folder_each_top_level_notebook_is_one_submission(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ["b.ipynb", "a b.ipynb", "a_b.ipynb", "notes.txt", ".hidden.ipynb"]:
        (src / name).write_text(notebook_json(n=name))
    (src / "sub").mkdir()
    (src / "sub" / "nested.ipynb").write_text(notebook_json())
    os.symlink("/etc/hostname", src / "link.ipynb")
    found = discover(src, tmp_path / "staging")
    assert found.kind == "folder"
    by_name = {s.name: s for s in found.submissions}
    assert sorted(by_name) == ["a_b", "a_b-2", "b", "link"]
    assert by_name["link"].notebook is None and "symbolic link" in by_name["link"].problem
    staged = by_name["b"].notebook
    assert staged == tmp_path / "staging" / "b.ipynb"
    assert json.loads(staged.read_text())["metadata"]["fake"] == {"n": "b.ipynb"}


def test_export_zip_submitters_and_notebook_count_rules(tmp_path):
    nb = notebook_json(ok=True)
    src = make_export_zip(
        tmp_path / "export.zip",
        {
            "submission_101": {"quantization.ipynb": nb, ".ipynb_checkpoints/quantization-checkpoint.ipynb": nb},
            "submission_102": {"a.ipynb": nb, "b.ipynb": nb},
            "submission_103": {"notes.txt": "hi"},
            "submission_9": {"deep/down/work.ipynb": nb},
        },
        METADATA,
    )
    found = discover(src, tmp_path / "staging")
    assert found.kind == "gradescope_export"
    subs = {s.name: s for s in found.submissions}
    assert [s.name for s in found.submissions] == ["submission_9", "submission_101", "submission_102", "submission_103"]
    assert subs["submission_101"].problem is None
    assert subs["submission_101"].submitters[0]["email"] == "ada@example.edu"
    assert subs["submission_101"].notebook.read_text() == nb
    assert "2 notebooks (a.ipynb, b.ipynb)" in subs["submission_102"].problem
    assert len(subs["submission_102"].submitters) == 2
    assert (
        "No notebook (.ipynb) found" in subs["submission_103"].problem and "notes.txt" in subs["submission_103"].problem
    )
    assert subs["submission_9"].notebook is not None and subs["submission_9"].submitters == []


def test_export_zip_rejects_traversal_absolute_and_symlink_entries(tmp_path):
    nb = notebook_json()
    link = zipfile.ZipInfo("assignment_1_export/submission_2/evil.ipynb")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    src = make_export_zip(
        tmp_path / "export.zip",
        {"submission_1": {"ok.ipynb": nb}, "submission_2": {}},
        "submission_1: {}\n",
        extra=[
            ("../escaped.ipynb", nb.encode()),
            ("assignment_1_export/submission_1/../../../up.ipynb", nb.encode()),
            ("/tmp/absolute.ipynb", nb.encode()),
            (link, b"/etc/passwd"),
        ],
    )
    staging = tmp_path / "out" / ".sources"
    found = discover(src, staging)
    assert len([w for w in found.warnings if "rejected" in w]) == 4, found.warnings
    assert any("'..'" in w for w in found.warnings) and any("absolute" in w for w in found.warnings)
    subs = {s.name: s for s in found.submissions}
    assert subs["submission_1"].problem is None
    assert "symbolic link" in subs["submission_2"].problem
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["export.zip", "out/.sources/submission_1.ipynb"]


def test_export_zip_without_or_with_broken_metadata_still_grades(tmp_path):
    nb = notebook_json()
    missing = discover(make_export_zip(tmp_path / "a.zip", {"submission_1": {"x.ipynb": nb}}, None), tmp_path / "s1")
    assert [s.name for s in missing.submissions] == ["submission_1"]
    assert any("no submission_metadata.yml" in w for w in missing.warnings)
    broken = discover(
        make_export_zip(tmp_path / "b.zip", {"submission_1": {"x.ipynb": nb}}, ":submitters: [\n"), tmp_path / "s2"
    )
    assert broken.submissions[0].notebook is not None
    assert any("could not be read" in w for w in broken.warnings)


def test_unpacked_export_folder_is_read_like_the_zip(tmp_path):
    root = tmp_path / "assignment_1_export"
    (root / "submission_7").mkdir(parents=True)
    (root / "submission_7" / "hw.ipynb").write_text(notebook_json())
    (root / "submission_metadata.yml").write_text("submission_7:\n  :submitters:\n  - :name: Unzipped\n")
    found = discover(tmp_path, tmp_path / "staging")
    assert found.kind == "gradescope_export"
    assert [(s.name, s.submitters[0]["name"]) for s in found.submissions] == [("submission_7", "Unzipped")]


def test_oversized_notebook_is_a_problem_not_a_crash(tmp_path, monkeypatch):
    import autograder.batch.sources as sources

    monkeypatch.setattr(sources, "MAX_NOTEBOOK_BYTES", 100)
    src = make_export_zip(tmp_path / "e.zip", {"submission_1": {"big.ipynb": "x" * 500}}, None)
    (sub,) = discover(src, tmp_path / "staging").submissions
    assert sub.notebook is None and "500 bytes" in sub.problem


def test_bad_sources_fail_loudly(tmp_path):
    with pytest.raises(SourceError, match="does not exist"):
        discover(tmp_path / "nope", tmp_path / "s")
    (tmp_path / "f.txt").write_text("not a zip")
    with pytest.raises(SourceError, match="neither a folder nor a zip"):
        discover(tmp_path / "f.txt", tmp_path / "s")


def test_zip_of_plain_notebooks_in_one_folder(tmp_path):
    src = tmp_path / "nbs.zip"
    with zipfile.ZipFile(src, "w") as zf:
        zf.writestr("class/alice.ipynb", notebook_json())
        zf.writestr("class/bob.ipynb", notebook_json())
    found = discover(src, tmp_path / "staging")
    assert found.kind == "zip" and [s.name for s in found.submissions] == ["alice", "bob"]
    assert isinstance(found.submissions[0].notebook, Path)


def test_submission_times_come_from_the_export_metadata_as_iso_8601():
    assert parse_submission_times(METADATA) == {"submission_101": "2024-03-01T10:00:00-08:00"}


@pytest.mark.parametrize(
    "value, iso",
    [
        ("2024-03-01 10:00:00.000000000 -08:00", "2024-03-01T10:00:00-08:00"),
        ("2024-03-01 10:00:00 +0530", "2024-03-01T10:00:00+05:30"),
        ("2024-03-01T10:00:00Z", "2024-03-01T10:00:00+00:00"),
        ("2024-03-01 10:00:00", "2024-03-01T10:00:00"),
        ("yesterday", ""),
        (None, ""),
        ("2024-13-01 10:00:00", ""),
    ],
)
def test_a_ruby_or_yaml_time_reads_as_iso_8601(value, iso):
    assert iso_time(value) == iso
