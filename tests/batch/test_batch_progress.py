"""The batch's progress: the whole class is counted on resume, the ETA follows this run's pace
(it grows while nothing finishes), and a submission past its expected time is named."""

from __future__ import annotations

import io

from batchkit import GOOD, write_notebook
from rich.console import Console

from autograder.batch import progress as progress_mod
from autograder.batch import run_batch
from autograder.batch.progress import ProgressBar


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _terminal() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=True, width=160), buf


def test_a_resumed_batch_counts_the_whole_class():
    console, buf = _terminal()
    with ProgressBar(True, 8, "2 local worker(s)", console=console, done=3) as bar:
        bar.progress.refresh()
        assert "3/8" in buf.getvalue()
        bar.done({"name": "dave", "status": "ok"})
        bar.progress.refresh()
    text = buf.getvalue()
    assert "4/8" in text and "/5" not in text


def test_the_eta_follows_the_pace_and_a_late_submission_is_named_once():
    console, buf = _terminal()
    clock = Clock()
    with ProgressBar(True, 4, "2 local worker(s)", console=console, clock=clock) as bar:
        assert bar.eta() == "?", "nothing finished: no made-up ETA"
        bar.started("alice")
        bar.started("bob.ipynb")
        clock.now += 10
        bar.done({"name": "alice", "status": "ok"})
        assert bar.expected_s() == progress_mod.MIN_EXPECTED_S  # 2 × 10 s, but at least the floor
        assert bar.eta() == "0:30"  # 3 left at 10 s each
        assert bar.late() == []
        clock.now += 90  # bob runs on: a long timeout
        bar.tick()
        assert bar.late() == [("bob.ipynb", 100.0)]
        assert bar.description() == "still running: bob.ipynb 1:40, expected ≤ 0:30"
        assert bar.eta() == "≥ 5:00", "the ETA grows while nothing finishes, a lower bound while one runs late"
        bar.started("carol")
        clock.now += 1
        bar.done({"name": "carol", "status": "ok"})  # a quick one: the median moves...
        assert bar.description() == "still running: bob.ipynb 1:41, expected ≤ 0:30", "...not bob's expected time"
        clock.now += 99
        bar.tick()
        assert bar.eta() == "≥ 3:20"
        bar.progress.refresh()
        bar.done({"name": "bob.ipynb", "status": "timeout"})
        assert bar.late() == [] and bar.description() == "bob.ipynb: timeout"
    text = buf.getvalue()
    assert text.count("still running: bob.ipynb for 1:40") == 1, "named once in a line, then on the bar"
    assert "still running: bob.ipynb 3:20, expected ≤ 0:30" in text


def test_a_late_line_never_shows_the_same_time_twice_and_the_eta_respects_the_limit():
    clock = Clock()
    bar = ProgressBar(False, 3, "x", clock=clock, limit_s=120.0)
    bar.started("a")
    clock.now += 39.5
    bar.done({"name": "a", "status": "ok"})  # expected: 2 × 39.5 = 79 s
    bar.started("loop")
    clock.now += 79.6
    assert bar.late() == [], "1:19 against ≤ 1:19 is not late yet"
    clock.now += 1.0
    assert [n for n, _ in bar.late()] == ["loop"]
    assert bar.eta() == "≥ 4:00", "2 left at this run's pace (2:00.1 each so far): more than the limit's 0:39"
    clock.now += 30
    bar.done({"name": "b", "cached": True})
    assert bar.eta() == "≥ 1:15", "1 left at the pace; the limit leaves 0:09"


def test_cached_submissions_do_not_set_the_expected_time():
    clock = Clock()
    bar = ProgressBar(False, 3, "x", clock=clock)
    bar.started("a")
    clock.now += 40
    bar.done({"name": "a", "status": "ok"})
    bar.done({"name": "b", "cached": True})
    assert bar.expected_s() == 80.0


def test_a_batch_names_the_submission_past_its_expected_time(tmp_path, fake_assignment, exec_log, monkeypatch, capsys):
    monkeypatch.setattr(progress_mod, "FIRST_EXPECTED_S", 0.5)
    monkeypatch.setattr(progress_mod, "MIN_EXPECTED_S", 0.5)
    src = tmp_path / "src"
    write_notebook(src / "slowpoke.ipynb", **GOOD, sleep=4, tag="slow")
    summary = run_batch(src, tmp_path / "out", assignment=fake_assignment, jobs=1, progress=False)
    assert summary.rows[0]["status"] == "ok"
    err = capsys.readouterr().err
    assert err.count("still running: slowpoke for") == 1, err


def test_a_resumed_batch_on_a_terminal_counts_from_the_finished_ones(
    tmp_path, fake_assignment, exec_log, monkeypatch, capsys
):
    src = tmp_path / "src"
    for name in ("a", "b", "c", "d", "e"):
        write_notebook(src / f"{name}.ipynb", **GOOD, tag=name)
    out = tmp_path / "out"
    run_batch(src, out, assignment=fake_assignment, jobs=2, progress=False)
    for name in ("d", "e"):  # as if the batch was stopped before them
        (out / name / "submission.json").unlink()
    capsys.readouterr()
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich draws the bar as on a terminal
    monkeypatch.setenv("COLUMNS", "140")
    summary = run_batch(src, out, assignment=fake_assignment, jobs=2, progress=True)
    assert summary.skipped == 3
    err = capsys.readouterr().err
    assert "3/5" in err and "5/5" in err and "/2" not in err, err
