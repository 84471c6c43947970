"""The console script's quick exit (``autograder.cli.main``): output flushed, exit handlers run,
exit statuses kept, and the normal exit whenever another thread still runs. Real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from autograder import __version__


# buffered as on a student's or instructor's machine (a CI shell may set PYTHONUNBUFFERED)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, env=ENV)


def _main_after(setup: str, marker: Path) -> subprocess.CompletedProcess:
    """``autograder --version`` through ``cli.main()`` after ``setup`` (which may write ``path``: ``marker``)."""
    return _python(
        "import sys\nfrom autograder import cli\npath = sys.argv[1]\n"
        + setup
        + "sys.argv = ['autograder', '--version']\ncli.main()\n",
        str(marker),
    )


def test_piped_output_arrives_whole_and_the_status_is_kept():
    # a pipe makes stdout block-buffered: only an explicit flush gets it out before os._exit
    proc = subprocess.run(
        [sys.executable, "-m", "autograder.cli", "--version"], capture_output=True, text=True, timeout=120, env=ENV
    )
    assert (proc.returncode, proc.stdout) == (0, f"autograder {__version__}\n"), proc.stderr
    unflushed = _python("import sys\nfrom autograder import cli\nsys.stdout.write('still buffered')\ncli._leave(0)\n")
    assert (unflushed.returncode, unflushed.stdout) == (0, "still buffered"), unflushed.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "autograder.cli", "no-such-command"],
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
    )
    assert bad.returncode == 2 and "no-such-command" in bad.stderr


def test_exit_handlers_run_before_the_quick_exit(tmp_path: Path):
    marker = tmp_path / "handler-ran"
    proc = _main_after("import atexit\natexit.register(lambda: open(path, 'w').write('yes'))\n", marker)
    assert proc.returncode == 0, proc.stderr
    assert marker.read_text() == "yes", "an atexit handler was skipped"


def test_a_thread_still_running_gets_the_normal_exit_which_waits_for_it(tmp_path: Path):
    marker = tmp_path / "thread-done"
    proc = _main_after(
        "import threading, time\n"
        "def late():\n"
        "    time.sleep(0.5)\n"
        "    open(path, 'w').write('done')\n"
        "threading.Thread(target=late).start()\n",
        marker,
    )
    assert proc.returncode == 0, proc.stderr
    assert marker.read_text() == "done", "the quick exit cut a running thread short"


def test_a_message_as_exit_code_is_printed_with_status_1():
    proc = _python("from autograder import cli\ncli._leave('the grader gave up')\n")
    assert proc.returncode == 1 and proc.stderr.strip() == "the grader gave up"
