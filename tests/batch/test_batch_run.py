"""run_batch with fake execute/measure stages: gradebook, parallel slots, cache, resume, failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from batchkit import GOOD, batch_in_child, executions, make_export_zip, notebook_json, read_gradebook, write_notebook

from autograder.batch import BatchError, run_batch
from autograder.errors import SandboxUnavailableError

STAGE_FILES = [
    "execution.json",
    "feedback.html",
    "feedback.md",
    "grade.json",
    "measurements.json",
    "results.json",
    "submission.json",
]


def mixed_class(src: Path, sleep: float = 0.0) -> Path:
    write_notebook(src / "alice.ipynb", **GOOD, sleep=sleep)
    write_notebook(src / "bob.ipynb", agree=0.5, dyn=(0.5, 0.2), qdq=(0.30, 0.05), sleep=sleep)
    write_notebook(src / "carol.ipynb", status="timeout", reason="stopped after 10 s", sleep=sleep)
    write_notebook(src / "dave.ipynb", **{"raise": "grader bug", "sleep": sleep})
    write_notebook(
        src / "erin.ipynb",
        **{**GOOD, "qdq": (0.30, 0.5)},
        sleep=sleep,
        first_error={"cell": 3, "ename": "ValueError", "evalue": "bad shape"},
    )
    return src


OUTCOME_OF = {"ok": "graded", "timeout": "timed out", "kernel_died": "kernel died", "unreadable": "unreadable"}


def row(name, score, status, checks, cells_errored="0", cached="no", reason="", **extra):
    r = {
        "name": name,
        "submitters": "",
        "sids": "",
        "emails": "",
        "submitted_at": "",
        "score": score,
        "max_score": "35",
        "status": status,
        "outcome": OUTCOME_OF.get(status, "grader failure") if float(score) or status != "ok" else "not attempted",
        "cells_errored": cells_errored,
        "execution_s": "1",
        "cached": cached,
        "reason": reason,
    }
    r.update(zip(["quantize", "size", "drift", "execution"], checks))
    r.update(extra)
    return r


def test_batch_folder_gradebook_row_by_row(tmp_path, fake_assignment, exec_log, results_validator):
    src = mixed_class(tmp_path / "src", sleep=0.3)
    out = tmp_path / "out"
    summary = run_batch(src, out, assignment=fake_assignment, jobs=2, progress=False)

    assert read_gradebook(out) == [
        row("alice", "35", "ok", ["10", "10", "10", "5"]),
        row("bob", "15", "ok", ["0", "5", "5", "5"]),
        row("carol", "0", "timeout", ["0", "0", "0", "0"], cells_errored="1", reason="stopped after 10 s"),
        row(
            "dave",
            "0",
            "grader_error",
            ["", "", "", ""],
            cells_errored="",
            reason="RuntimeError: grader bug",
            execution_s="",
        ),
        row("erin", "28", "ok", ["10", "10", "5", "3"], cells_errored="1"),
    ]
    assert [(r["name"], r["score"], r["max"], r["checks"].get("size")) for r in summary.rows][:2] == [
        ("alice", 35.0, 35.0, 10.0),
        ("bob", 15.0, 35.0, 5.0),
    ]
    for name in ["alice", "bob", "carol", "erin"]:
        assert sorted(p.name for p in (out / name).iterdir()) == STAGE_FILES
        results_validator(json.loads((out / name / "results.json").read_text()))
    dave = json.loads((out / "dave" / "results.json").read_text())
    results_validator(dave)
    assert dave["score"] == 0 and "grader itself failed" in dave["output"]
    slots = {line.split()[1] for line in exec_log.read_text().splitlines()}
    assert slots == {"slot=0", "slot=1"}, "two workers, each with its own sandbox slot"
    assert (summary.executed, summary.cache_hits, summary.skipped) == (5, 0, 0)
    assert json.loads((out / "batch.json").read_text())["state"] == "finished"
    assert (out / "summary.html").stat().st_size > 10_000


def test_batch_export_zip_names_sids_emails(tmp_path, fake_assignment, exec_log):
    meta = (
        "submission_11:\n  :submitters:\n  - :name: Ada Lovelace\n    :sid: '1815'\n    :email: ada@x.edu\n"
        "submission_12:\n  :submitters:\n  - :name: '=cmd|calc'\n    :sid: '2'\n    :email: c@x.edu\n"
        "  - :name: Grace Hopper\n    :sid: '1906'\n    :email: g@x.edu\n"
        "submission_13:\n  :submitters:\n  - :name: Two Books\n"
    )
    src = make_export_zip(
        tmp_path / "export.zip",
        {
            "submission_11": {"hw.ipynb": notebook_json(**GOOD)},
            "submission_12": {"hw.ipynb": notebook_json(agree=0.5)},
            "submission_13": {"a.ipynb": notebook_json(), "b.ipynb": notebook_json()},
        },
        meta,
    )
    out = tmp_path / "out"
    run_batch(src, out, assignment=fake_assignment, jobs=2, progress=False)
    book = read_gradebook(out)
    assert [(r["name"], r["submitters"], r["sids"], r["emails"], r["score"], r["status"]) for r in book] == [
        ("submission_11", "Ada Lovelace", "1815", "ada@x.edu", "35", "ok"),
        ("submission_12", "'=cmd|calc; Grace Hopper", "2; 1906", "c@x.edu; g@x.edu", "25", "ok"),
        ("submission_13", "Two Books", "", "", "0", "unreadable"),
    ]
    assert "2 notebooks (a.ipynb, b.ipynb)" in book[2]["reason"]
    assert book[2]["quantize"] == "0", "the zero goes through the judge: every check scored"
    assert sorted(executions(exec_log)) == ["submission_11", "submission_12"]
    results = json.loads((out / "submission_13" / "results.json").read_text())
    assert results["score"] == 0 and "2 notebooks" in json.dumps(results)


def test_identical_notebooks_run_once_within_and_across_batches(tmp_path, fake_assignment, exec_log):
    src = tmp_path / "src"
    for name in ["a", "b_copy", "c_copy"]:
        write_notebook(src / f"{name}.ipynb", **GOOD, sleep=0.2)
    write_notebook(src / "d.ipynb", agree=0.5)
    cache = tmp_path / "shared-cache"
    first = run_batch(src, tmp_path / "out1", assignment=fake_assignment, jobs=3, progress=False, cache_dir=cache)
    assert sorted(executions(exec_log)) == ["a", "d"], "the two copies of a.ipynb were not executed"
    assert (first.executed, first.cache_hits) == (2, 2)
    assert [(r["name"], r["score"], r["cached"]) for r in first.rows] == [
        ("a", 35.0, False),
        ("b_copy", 35.0, True),
        ("c_copy", 35.0, True),
        ("d", 25.0, False),
    ]
    second = run_batch(src, tmp_path / "out2", assignment=fake_assignment, jobs=2, progress=False, cache_dir=cache)
    assert len(executions(exec_log)) == 2, "a second batch with the same cache executes nothing"
    assert (second.executed, second.cache_hits) == (0, 4)
    assert [r["score"] for r in second.rows] == [35.0, 35.0, 35.0, 25.0]


def test_rerun_skips_finished_and_regrades_changed_or_unstamped(tmp_path, fake_assignment, exec_log):
    src = mixed_class(tmp_path / "src")
    write_notebook(src / "frank.ipynb", status="sandbox_error", reason="bwrap could not start")
    out = tmp_path / "out"
    run_batch(src, out, assignment=fake_assignment, jobs=2, progress=False, use_cache=False)
    assert sorted(executions(exec_log)) == ["alice", "bob", "carol", "carol", "dave", "erin", "frank"], (
        "carol's timeout had a neighbour running: regraded once alone"
    )
    exec_log.write_text("")
    (out / "bob" / "submission.json").unlink()  # stopped before its stamp was written
    write_notebook(src / "erin.ipynb", **GOOD)  # resubmitted: another hash
    again = run_batch(src, out, assignment=fake_assignment, jobs=2, progress=False, use_cache=False)
    assert sorted(executions(exec_log)) == ["bob", "dave", "erin", "frank"], (
        "dave (grader_error) and frank (sandbox_error) failed on our side: retried"
    )
    assert (again.skipped, again.graded) == (2, 4)
    assert [r["score"] for r in again.rows] == [35.0, 15.0, 0.0, 0.0, 35.0, 0.0], "erin's new notebook has no error"


def test_ctrl_c_stops_workers_and_a_rerun_resumes(tmp_path, fake_assignment, exec_log):
    """Ctrl-C reaches the batch's process (a child of the test's, so pytest's own is never
    signalled) while a worker grades: the batch raises KeyboardInterrupt, having stopped every worker."""
    src = tmp_path / "src"
    for name in ["a", "b", "d"]:
        write_notebook(src / f"{name}.ipynb", **GOOD, sleep=0.4, tag=name)
    write_notebook(src / "c.ipynb", **GOOD, interrupt_parent_once=True)
    out = tmp_path / "out"
    seen = batch_in_child(src, out, assignment=fake_assignment, jobs=2, progress=False)
    assert seen["raised"] == "KeyboardInterrupt", seen
    assert seen["children_left"] == 0, "every worker was stopped"
    assert exec_log.with_suffix(".cleaned").exists(), "the interrupted worker unwound through its cleanups"
    assert json.loads((out / "batch.json").read_text())["state"] == "interrupted"
    finished = {p.parent.name for p in out.glob("*/submission.json")}
    assert "c" not in finished and finished < {"a", "b", "d"}
    exec_log.write_text("")
    summary = run_batch(src, out, assignment=fake_assignment, jobs=2, progress=False)
    executed, cached = set(executions(exec_log)), {r["name"] for r in summary.rows if r["cached"]}
    assert "c" in executed and not executed & cached and executed | cached == {"a", "b", "c", "d"} - finished, (
        "finished ones skipped; the rest run, or judged from measurements stored before the interrupt"
    )
    assert [(r["name"], r["status"], r["score"]) for r in summary.rows] == [
        (n, "ok", 35.0) for n in ["a", "b", "c", "d"]
    ]
    assert summary.skipped == len(finished)


def test_a_worker_that_dies_is_retried_alone_then_worker_lost(tmp_path, fake_assignment, exec_log, capsys):
    src = tmp_path / "src"
    write_notebook(src / "crash.ipynb", die=True)
    for name in ["ok1", "ok2", "ok3"]:
        write_notebook(src / f"{name}.ipynb", **GOOD, tag=name, sleep=0.1)
    summary = run_batch(src, tmp_path / "out", assignment=fake_assignment, jobs=2, progress=False)
    assert executions(exec_log).count("crash") == 2
    assert [(r["name"], r["status"]) for r in summary.rows] == [
        ("crash", "worker_lost"),
        ("ok1", "ok"),
        ("ok2", "ok"),
        ("ok3", "ok"),
    ]
    assert "retried alone" in summary.rows[0]["reason"]
    assert capsys.readouterr().err.count("a worker process of the local pool died") == 2, "said each time"
    assert json.loads((tmp_path / "out" / "crash" / "results.json").read_text())["score"] == 0


def test_missing_sandbox_stops_the_batch_loudly(tmp_path, fake_assignment, exec_log):
    src = tmp_path / "src"
    write_notebook(src / "a.ipynb", no_sandbox=True)
    with pytest.raises(SandboxUnavailableError, match="no isolation"):
        run_batch(src, tmp_path / "out", assignment=fake_assignment, jobs=1, progress=False)
    assert not (tmp_path / "out" / "a" / "submission.json").exists()


def test_out_folder_of_another_assignment_is_refused(tmp_path, fake_assignment, exec_log):
    out = tmp_path / "out"
    out.mkdir()
    (out / "batch.json").write_text(json.dumps({"assignment": "other-assignment"}))
    write_notebook(tmp_path / "src" / "a.ipynb", **GOOD)
    with pytest.raises(BatchError, match="other-assignment"):
        run_batch(tmp_path / "src", out, assignment=fake_assignment, progress=False)
    assert executions(exec_log) == []


def test_cli_batch_then_rescore(tmp_path, fake_root, exec_log):
    import typer
    from typer.testing import CliRunner

    from autograder.batch import cli as cli_batch

    app = typer.Typer()
    cli_batch.register(app)
    src = mixed_class(tmp_path / "src")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["batch", str(src), "--out", str(out), "-j", "2", "--assignment", "fake-07"])
    assert result.exit_code == 0, result.output
    assert "5 submissions" in result.output and f"{out}/gradebook.csv" in result.output.replace("\n", "")
    strict = tmp_path / "strict.toml"
    strict.write_text("[functions]\nagree_share_min = 1.0\n[size]\nratio_max = 0.28\n[drift]\nmax_abs_dp_max = 0.1\n")
    result = CliRunner().invoke(app, ["rescore", str(out), "--tolerances", str(strict)])
    assert result.exit_code == 0, result.output
    assert "rescored 4 of 5" in result.output
    assert read_gradebook(out)[0]["score"] == "30"
    note = [line for line in result.output.splitlines() if line.startswith("tolerances: ")]
    assert len(note) == 1 and f"override {strict} (given)" in note[0]
    result = CliRunner().invoke(app, ["rescore", str(out)])  # plain: the override is kept
    assert result.exit_code == 0 and "no score changed" in result.output, result.output
    assert "kept from the last run of this batch; --calibrated goes back" in result.output
    assert read_gradebook(out)[0]["score"] == "30"
    result = CliRunner().invoke(app, ["rescore", str(out), "--calibrated"])
    assert result.exit_code == 0 and "tolerances: the calibrated ones" in result.output
    assert read_gradebook(out)[0]["score"] != "30"
    result = CliRunner().invoke(app, ["rescore", str(out), "--calibrated", "--tolerances", str(strict)])
    assert result.exit_code == 2 and "give one of them" in result.output
    result = CliRunner().invoke(app, ["rescore", str(tmp_path / "src")])
    assert result.exit_code == 2 and "batch.json is missing" in result.output


def test_progress_bar_shows_count_and_eta_on_a_terminal_only():
    import io

    from rich.console import Console

    from autograder.batch.progress import ProgressBar

    buf = io.StringIO()
    with ProgressBar(True, 2, "2 local worker(s)", console=Console(file=buf, force_terminal=True, width=120)) as bar:
        bar.done({"name": "alice", "status": "ok"})
        bar.done({"name": "bob", "cached": True})
    text = buf.getvalue()
    assert "2/2" in text and "ETA" in text and "bob: cached" in text
    quiet = io.StringIO()
    with ProgressBar(True, 2, "2 local worker(s)", console=Console(file=quiet, force_terminal=False)) as bar:
        bar.done({"name": "alice", "status": "ok"})
    assert quiet.getvalue() == "", "no progress bar where stderr is not a terminal"
