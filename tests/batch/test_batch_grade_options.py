"""One ``GradeOptions`` value carries the grading options from the front end to the pipeline.

It must pickle (a local pool's and Dask's jobs), keep batch.json's task records as they were
(flat ``tolerances``, ``rubric``, ``unsafe_no_sandbox``), never send a client's path to a worker
(the files travel as bytes), and reach ``execute_and_measure`` and the judge on every worker.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchkit import GOOD, fake_stages, write_notebook

from autograder.batch import run_batch
from autograder.batch.worker import Task, make_job, task_from_json, task_to_json
from autograder.grade_options import GradeOptions

EXAMPLES = int(os.environ.get("AUTOGRADER_FUZZ_EXAMPLES", "60"))

paths = st.none() | st.lists(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00/"), min_size=1, max_size=12),
    min_size=1,
    max_size=4,
).map(lambda p: Path("/", *p))
options = st.builds(
    GradeOptions, tolerances=paths, rubric=paths, unsafe_no_sandbox=st.booleans(), kernel_template=st.booleans()
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(options)
def test_options_pickle_and_survive_batch_json(o):
    assert pickle.loads(pickle.dumps(o)) == o
    assert GradeOptions.from_json(json.loads(json.dumps(o.to_json()))) == o
    assert set(o.to_json()) == {f.name for f in dataclasses.fields(GradeOptions)}, "every option is recorded"
    task = Task(name="a", notebook="/x/a.ipynb", problem=None, sha256="0", key="k", out_dir="/x/out/a", options=o)
    record = json.loads(json.dumps(task_to_json(task)))
    assert "options" not in record and record["unsafe_no_sandbox"] is o.unsafe_no_sandbox, (
        "batch.json keeps a task's options flat, as before they were one value"
    )
    assert task_from_json(record) == task
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.unsafe_no_sandbox = not o.unsafe_no_sandbox  # type: ignore[misc]


@pytest.mark.parametrize(
    "record, expected",
    [
        (
            {"tolerances": "/o/t.toml", "rubric": None, "unsafe_no_sandbox": True},
            GradeOptions(tolerances=Path("/o/t.toml"), unsafe_no_sandbox=True),
        ),
        ({"tolerances": "", "rubric": "/o/r.toml"}, GradeOptions(rubric=Path("/o/r.toml"))),  # empty: none
        ({}, GradeOptions()),  # a minimal record
    ],
)
def test_a_stored_task_record_gives_its_options(record, expected):
    base = {"name": "a", "notebook": None, "problem": "none", "sha256": "0", "key": "none", "out_dir": "/o/a"}
    assert task_from_json({**base, **record}).options == expected


def test_a_job_carries_the_options_and_the_files_bytes_but_no_client_path(tmp_path):
    notebook = write_notebook(tmp_path / "client" / "a.ipynb", **GOOD)
    tolerances, rubric = tmp_path / "client" / "t.toml", tmp_path / "client" / "r.toml"
    tolerances.write_text("[functions]\nagree_share_min = 0.5\n")
    rubric.write_text("# another rubric\n")
    task = Task(
        name="a",
        notebook=str(notebook),
        problem=None,
        sha256="0",
        key="k",
        out_dir=str(tmp_path / "out"),
        options=GradeOptions(tolerances=tolerances, rubric=rubric, unsafe_no_sandbox=True),
    )
    job = make_job(task, "fake-07", "f" * 16)
    assert job.options == GradeOptions(unsafe_no_sandbox=True)
    assert (job.tolerances, job.rubric) == (tolerances.read_bytes(), rubric.read_bytes())
    assert str(tmp_path / "client").encode() not in pickle.dumps(job), "a worker never sees the client's paths"


@pytest.mark.parametrize("unsafe, override", [(True, True), (False, False)])
def test_the_options_of_a_batch_reach_the_pipeline_on_every_worker(
    tmp_path, fake_assignment, monkeypatch, unsafe, override
):
    """Through the local pool (forked workers, pickled jobs): the jail's flag reaches
    execute_and_measure and the override reaches the judge, for every submission."""
    import autograder.pipeline

    log, seen = tmp_path / "executions.log", tmp_path / "unsafe.log"
    stages = fake_stages(log)

    def recording(notebook, assignment, out_dir, workspace, *, unsafe_no_sandbox=False, **rest):
        assert rest["kernel_template"] is unsafe  # the kernel template's flag travels the same way
        with open(seen, "a") as f:
            f.write(f"{Path(notebook).stem} {unsafe_no_sandbox}\n")
        return stages(notebook, assignment, out_dir, workspace, unsafe_no_sandbox=unsafe_no_sandbox, **rest)

    monkeypatch.setattr(autograder.pipeline, "execute_and_measure", recording)
    src = tmp_path / "src"
    for name in ("alice", "bob", "carol"):
        write_notebook(src / f"{name}.ipynb", **GOOD)
    file = tmp_path / "override.toml"
    file.write_text("[functions]\nagree_share_min = 0.5\n")
    given_options = GradeOptions(
        tolerances=file if override else None, unsafe_no_sandbox=unsafe, kernel_template=unsafe
    )
    out = tmp_path / "out"
    run_batch(src, out, assignment=fake_assignment, options=given_options, jobs=2, progress=False, use_cache=False)

    assert sorted(seen.read_text().split("\n")[:-1]) == [f"{n} {unsafe}" for n in ("alice", "bob", "carol")]
    for name in ("alice", "bob", "carol"):
        grade = json.loads((out / name / "grade.json").read_text())
        changed = (grade["tolerances"]["override"] or {}).get("changed")
        assert changed == ({"functions.agree_share_min": {"calibrated": 1.0, "value": 0.5}} if override else None)
    stored = json.loads((out / "batch.json").read_text())["submissions"]
    assert {(s["tolerances"], s["unsafe_no_sandbox"]) for s in stored} == {
        (str(file.resolve()) if override else None, unsafe)
    }


@pytest.mark.parametrize(("flags", "kernel_template"), [([], True), (["--fresh-kernels"], False)])
def test_the_batch_command_uses_the_kernel_template_unless_fresh_kernels(tmp_path, monkeypatch, flags, kernel_template):
    """``autograder batch`` asks for each worker's kernel template by default; ``--fresh-kernels`` does not."""
    import autograder.batch.run
    from typer.testing import CliRunner

    from autograder.cli import app

    given: list[GradeOptions] = []

    def capture(source, out, *, options, **_kw):
        given.append(options)
        raise KeyboardInterrupt  # stands for the batch: nothing is graded here

    monkeypatch.setattr(autograder.batch.run, "run_batch", capture)
    src = tmp_path / "src"
    write_notebook(src / "alice.ipynb", **GOOD)
    argv = ["batch", str(src), "--out", str(tmp_path / "out"), "--assignment", "07-quantization", *flags]
    CliRunner().invoke(app, argv)
    assert [o.kernel_template for o in given] == [kernel_template]
