"""Batch grading through the real jail, kernels and ONNX Runtime (slow: two real notebooks).

One Gradescope-style export is graded once per module with -j 2: the reference solution, an
identical copy of it (must come from the cache), the untouched student notebook, and a
submission without a notebook. Then it is rescored with a tightened tolerance while every way
of executing a notebook raises.
"""

from __future__ import annotations

import json

import pytest
import tomli_w
from batchkit import make_export_zip, read_gradebook

from autograder.grade_options import GradeOptions
from autograder.assignment import load_toml
from autograder.batch import rescore, run_batch
from needs import needs

pytestmark = pytest.mark.slow

META = (
    "submission_1:\n  :submitters:\n  - :name: Ref Erence\n    :sid: '1'\n    :email: ref@x.edu\n"
    "submission_2:\n  :submitters:\n  - :name: Copy Cat\n    :sid: '2'\n    :email: copy@x.edu\n"
    "submission_3:\n  :submitters:\n  - :name: Not Started\n    :sid: '3'\n"
    "submission_4:\n  :submitters:\n  - :name: No Notebook\n    :sid: '4'\n"
)


@pytest.fixture(scope="module")
@needs("kernel")
def graded(assignment, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("real-batch")
    examples = assignment.folder / "examples"
    reference = (examples / "reference.ipynb").read_bytes()
    src = make_export_zip(
        tmp / "export.zip",
        {
            "submission_1": {"quantization.ipynb": reference},
            "submission_2": {"my copy.ipynb": reference, "notes.txt": b"same as my friend's"},
            "submission_3": {"07-quantization.ipynb": (examples / "untouched.ipynb").read_bytes()},
            "submission_4": {"report.pdf": b"%PDF-1.4"},
        },
        META,
    )
    out = tmp / "out"
    summary = run_batch(src, out, assignment=assignment, jobs=2, progress=False)
    return summary, out


def test_real_export_batch(graded, results_validator):
    summary, out = graded
    assert (summary.executed, summary.cache_hits) == (2, 1), "the identical copy is judged from the cache"
    book = {r["name"]: r for r in read_gradebook(out)}
    assert [(r["name"], r["submitters"], r["sids"], r["status"]) for r in book.values()] == [
        ("submission_1", "Ref Erence", "1", "ok"),
        ("submission_2", "Copy Cat", "2", "ok"),
        ("submission_3", "Not Started", "3", "ok"),
        ("submission_4", "No Notebook", "4", "unreadable"),
    ]
    ref, copy, untouched, empty = book.values()
    assert ref["score"] == ref["max_score"] == "100"
    assert {k: v for k, v in copy.items() if k not in ("name", "submitters", "sids", "emails", "cached")} == {
        k: v for k, v in ref.items() if k not in ("name", "submitters", "sids", "emails", "cached")
    }
    assert (ref["cached"], copy["cached"]) == ("no", "yes")
    assert float(untouched["score"]) < 10 and int(untouched["cells_errored"]) > 0
    assert empty["score"] == "0" and "No notebook (.ipynb) found" in empty["reason"]
    for name in book:
        results_validator(json.loads((out / name / "results.json").read_text()))
    page = (out / "summary.html").read_text()
    assert page.count('<svg class="chart"') >= 2, "score histogram and pass rates (and the assignment's scatter)"
    assert summary.integrity.no_own_code == ["submission_3"], "the untouched notebook holds only the starter"
    assert [(p.a, p.b, p.share, p.flagged) for p in summary.integrity.pairs] == [
        ("submission_1", "submission_2", 1.0, True)
    ], "the two copies of the reference, and no other pair"
    assert (out / "integrity.csv").read_text().splitlines()[1].startswith("1,submission_1,submission_2,1,1,1,yes,")


def test_real_rescore_executes_nothing(graded, assignment, tmp_path, monkeypatch):
    import autograder.pipeline
    import autograder.sandbox

    def refuse(*args, **kwargs):
        raise AssertionError("rescore executed a notebook")

    monkeypatch.setattr(autograder.sandbox, "run_submission", refuse)
    monkeypatch.setattr(autograder.pipeline, "execute_and_measure", refuse)
    _, out = graded
    tolerances = load_toml(assignment.tolerances_path)
    tolerances["size"]["dynamic_ratio_max"] = 0.01  # no int8 file is 1 % of its fp32 file
    tight = tmp_path / "tight.toml"
    tight.write_text(tomli_w.dumps(tolerances))
    part_points = next(
        p["points"]
        for c in assignment.rubric()["checks"]
        for p in c.get("parts", [])
        if p.get("measure") == "models.int8_dynamic.size.ratio"
    )

    rescore(out, options=GradeOptions(tolerances=tight))
    book = {r["name"]: r for r in read_gradebook(out)}
    assert float(book["submission_1"]["score"]) == 100 - part_points
    assert float(book["submission_2"]["score"]) == 100 - part_points
    assert json.loads((out / "submission_1" / "results.json").read_text())["score"] == 100 - part_points

    rescore(out, calibrated=True)
    assert read_gradebook(out)[0]["score"] == "100"
