"""`gradescope simulate` is never silent while it builds: the container's log is read as it grows
and each complete line is handed on (sim/container.py's _LogTail), bounded per line."""

from __future__ import annotations

from autograder.gradescope.sim.container import _LogTail


def test_each_complete_line_is_told_once_as_it_comes(tmp_path):
    log = tmp_path / "setup.log"
    log.write_bytes(b"")
    seen: list[str] = []
    tail = _LogTail(log, seen.append)
    with open(log, "ab") as f:
        f.write(b"setup.sh: system packages\nsetup.sh: Pyth")
        f.flush()
        tail.poll()
        assert seen == ["setup.sh: system packages"], "a half-written line waits"
        f.write(b"on 3.11\n" + b"x" * 2000 + b"\n")
        f.flush()
        tail.poll()
        tail.poll()
    assert seen[1] == "setup.sh: Python 3.11" and len(seen) == 3 and len(seen[2]) == 500


def test_without_a_listener_nothing_is_read(tmp_path):
    log = tmp_path / "setup.log"
    log.write_bytes(b"setup.sh: a\n")
    tail = _LogTail(log, None)
    tail.poll()
    assert tail.offset == 0
