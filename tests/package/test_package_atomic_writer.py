"""The one atomic writer (safe_files.atomic_replace / write_atomic): a failure before the rename
leaves the old file and no temporary file, concurrent writers never show a reader a partial
file, and text is UTF-8 whatever the locale."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from autograder import safe_files
from autograder.safe_files import atomic_replace, write_atomic, write_json_atomic

OLD = "old content, kept\n"


def _fail_fsync(monkeypatch):
    def broken(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(safe_files.os, "fsync", broken)


def _fail_replace(monkeypatch):
    def broken(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(safe_files.os, "replace", broken)


def _interrupt_chmod(monkeypatch):  # a signal between the write and the rename (BaseException)
    def broken(path, mode):
        raise KeyboardInterrupt

    monkeypatch.setattr(safe_files.os, "chmod", broken)


FAILURES = {
    "fsync": (_fail_fsync, OSError),
    "replace": (_fail_replace, OSError),
    "interrupted": (_interrupt_chmod, KeyboardInterrupt),
}
WRITES = {
    "text": lambda p: write_atomic(p, "new ✓\n" * 1000),
    "bytes": lambda p: write_atomic(p, b"\0\1" * 5000),
    "json": lambda p: write_json_atomic(p, {"new": [1.5, float("nan")]}),
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_writer_failing_before_the_rename_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch, failure, write):
    path = tmp_path / "results.json"
    path.write_text(OLD, encoding="utf-8")
    patch, error = FAILURES[failure]
    patch(monkeypatch)
    with pytest.raises(error):
        WRITES[write](path)
    monkeypatch.undo()
    assert path.read_text(encoding="utf-8") == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_a_tool_failing_inside_atomic_replace_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "autograder.zip"
    path.write_bytes(b"old zip")
    with pytest.raises(RuntimeError), atomic_replace(path) as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".zip" and tmp.name != path.name
        tmp.write_bytes(b"half a zi")
        raise RuntimeError("the tool failed")
    assert path.read_bytes() == b"old zip"
    assert [p.name for p in tmp_path.iterdir()] == ["autograder.zip"]


def test_a_new_file_is_0644_and_a_replaced_one_keeps_its_bits_and_a_symlink_is_replaced_not_followed(tmp_path):
    fresh = write_atomic(tmp_path / "sub" / "feedback.md", "x")
    assert fresh.stat().st_mode & 0o777 == 0o644
    private = tmp_path / "grade.json"
    private.write_text("{}", encoding="utf-8")
    private.chmod(0o600)
    write_json_atomic(private, {"a": 1})
    assert private.stat().st_mode & 0o777 == 0o600
    target = tmp_path / "elsewhere.txt"
    target.write_text("not ours", encoding="utf-8")
    link = tmp_path / "gradebook.csv"
    link.symlink_to(target)
    write_atomic(link, "a,b\n")
    assert not link.is_symlink() and link.read_text(encoding="utf-8") == "a,b\n"
    assert target.read_text(encoding="utf-8") == "not ours"


def test_concurrent_writers_never_show_a_reader_a_partial_file(tmp_path):
    path = tmp_path / "summary.html"
    size, writers, rounds = 256 * 1024, 4, 15
    payloads = [chr(ord("a") + i) * size for i in range(writers)]
    write_atomic(path, payloads[0])
    torn: list[str] = []
    done = threading.Event()

    def read_until_done():
        while not done.is_set():
            text = path.read_text(encoding="utf-8")
            if text not in payloads:
                torn.append(f"{len(text)} characters, {sorted(set(text))[:5]}")

    def write(payload):
        for _ in range(rounds):
            write_atomic(path, payload)

    reader = threading.Thread(target=read_until_done)
    reader.start()
    threads = [threading.Thread(target=write, args=(p,)) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    done.set()
    reader.join(timeout=600)
    assert not reader.is_alive() and not any(t.is_alive() for t in threads)
    assert torn == []
    assert path.read_text(encoding="utf-8") in payloads
    assert [p.name for p in tmp_path.iterdir()] == ["summary.html"]


@pytest.mark.parametrize("text", ["é — ✓ 量子化\n", "a lone surrogate \ud800 becomes U+FFFD\r\n"])
def test_text_is_utf8_whatever_the_locale(tmp_path, text):
    """In a child whose locale is plain C (ASCII), without Python's UTF-8 mode or locale coercion."""
    path = tmp_path / "feedback.md"
    env = {
        **os.environ,
        "LC_ALL": "C",
        "LANG": "C",
        "PYTHONUTF8": "0",
        "PYTHONCOERCECLOCALE": "0",
        "PYTHONIOENCODING": "utf-8",
    }
    code = (
        "import ast, locale, sys; from autograder.safe_files import write_atomic; "
        "print(locale.getpreferredencoding(False)); write_atomic(sys.argv[1], ast.literal_eval(sys.argv[2]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(path), ascii(text)], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "utf" not in proc.stdout.lower().replace("-", ""), f"the child's locale is {proc.stdout!r}, not ASCII"
    assert path.read_bytes() == text.replace("\ud800", "\ufffd").encode("utf-8")


def test_written_json_reads_back_as_utf8(tmp_path):
    path = write_json_atomic(tmp_path / "grade.json", {"name": "Ångström ✓", "inf": float("inf")})
    assert path.read_bytes().decode("utf-8").endswith("}\n")
    assert "Ångström ✓" in path.read_bytes().decode("utf-8")
