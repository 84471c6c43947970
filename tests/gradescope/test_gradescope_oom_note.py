"""What run_autograder tells the student about the container's memory (unit tests; the real
OOM kill in the container is tested in test_gradescope_container.py and measured in bench/)."""

from __future__ import annotations

from autograder.gradescope.run import PLACEHOLDER_REASON, memory_note, placeholder_reason


def test_the_placeholder_names_the_containers_memory_when_it_is_known():
    assert "out of its 768 MB of memory" in placeholder_reason({"memory_limit_mb": 768, "oom_kills": 0})
    assert placeholder_reason({}) == PLACEHOLDER_REASON


def test_an_oom_kill_during_grading_is_explained():
    note = memory_note({"memory_limit_mb": 768, "oom_kills": 2}, {"memory_limit_mb": 768, "oom_kills": 3})
    assert "ran out of memory" in note and "(768 MB)" in note and "a process" in note
    two = memory_note({"memory_limit_mb": 768, "oom_kills": 0}, {"memory_limit_mb": 768, "oom_kills": 2})
    assert "2 processes" in two


def test_no_note_without_a_kill_or_without_a_container_limit():
    assert memory_note({"memory_limit_mb": 768, "oom_kills": 1}, {"memory_limit_mb": 768, "oom_kills": 1}) == ""
    assert memory_note({"oom_kills": 0}, {"oom_kills": 5}) == "", "a host's root cgroup counts other kills"
    assert memory_note({}, {}) == ""
