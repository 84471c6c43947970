"""Hostile shapes of the working directory: a folder nested 3,000 deep, and a thread that churns
the tree (creating, deleting, retyping names) while the grader copies it before the probe.

Both once ended as the grader's failure: ``RecursionError`` in the clean-up ("the grader itself
failed", 0/100), a name gone between listing and use in the copy (``sandbox_error``, "a problem on
our side", never cached). One walker (``autograder/tree_walk.py``) now does every copy,
size count and clean-up; a tree past its limits is a reason the student reads.
"""

from __future__ import annotations

import pytest

from advkit import WRONG_FUNCTIONS, Graded, blamed_on_the_grader, require_mode

pytestmark = pytest.mark.slow

DEEP = (
    WRONG_FUNCTIONS
    + r"""
import os
fd = os.open(".", os.O_RDONLY)
for _ in range(3000):
    os.mkdir("d", dir_fd=fd)
    sub = os.open("d", os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = sub
os.close(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
os.close(fd)
_record("deep", {"levels": 3000})
"""
)

CHURN = (
    WRONG_FUNCTIONS
    + r"""
import os, threading, time
def _churn(stop_at):
    i = 0
    while time.monotonic() < stop_at:
        i += 1
        name = "churn%d" % (i % 40)
        try:
            if os.path.isdir(name) and not os.path.islink(name):
                os.rmdir(name)
            elif os.path.lexists(name):
                os.unlink(name)
            kind = i % 4
            if kind == 0:
                with open(name, "wb") as f:
                    f.write(b"x" * 100)
            elif kind == 1:
                os.mkdir(name)
            elif kind == 2:
                os.symlink("/etc/hostname", name)
            else:
                os.mkfifo(name)
        except OSError:
            pass
threading.Thread(target=_churn, args=(time.monotonic() + 15,), daemon=True).start()
"""
)


# The depth limit fires whatever the time; wide time limits keep a loaded machine (Gradescope's
# container at 0.5 CPU beside a class's batch) from ending the probe on its budget before the
# copy's refusal is reached (seen once: probe "failed", no reason).
WIDE = {"cell_timeout_s": 60, "notebook_timeout_s": 240}


def test_a_working_directory_3000_folders_deep_is_a_graded_reason(
    grade_cells, jail_check, wrong_baseline, jail_mode, limited
):
    g = grade_cells([DEEP], name=f"deep-{jail_mode}", assignment=limited(**WIDE))
    require_mode(g, jail_mode)
    jail_check(g, compare_to=wrong_baseline)
    assert g.execution["status"] == "kernel_died", g.execution_brief()
    assert "nested deeper than 256" in g.execution["reason"], g.execution_brief()
    assert "nested deeper than 256" in g.student_text(), "the student is not told why"
    assert g.execution["probe"] != "completed", "hidden inputs were sent to a kernel whose tree was not copied"


def test_a_thread_churning_the_tree_during_the_copy_is_the_notebooks_outcome(
    grade_cells, jail_check, wrong_baseline, jail_mode
):
    g = grade_cells([CHURN], name=f"churn-{jail_mode}")
    require_mode(g, jail_mode)
    jail_check(g, compare_to=wrong_baseline)
    assert g.execution["status"] == "completed", g.execution_brief()
    assert g.execution["probe"] == "completed", g.execution_brief()


@pytest.mark.parametrize(
    "status, text, blamed",
    [
        ("completed", "Your notebook ran to the end.", False),
        ("kernel_died", "the working directory is nested deeper than 256 folders", False),
        ("sandbox_error", "The grader could not run your notebook (a problem on our side, not in your work)", True),
        ("startup_failed", "Your notebook's kernel could not start.", True),
        ("completed", "The grader itself failed while grading this notebook", True),
    ],
)
def test_the_rule_tells_a_students_outcome_from_the_graders_failure(tmp_path, status, text, blamed):
    """The check the grading fixtures apply to every hostile notebook can fail (no kernel here)."""
    g = Graded(
        name="rule",
        grade={},
        out=tmp_path,
        workspace=tmp_path,
        results={"output": text, "tests": []},
        execution={"status": status, "reason": text},
    )
    assert bool(blamed_on_the_grader(g)) is blamed, blamed_on_the_grader(g)
