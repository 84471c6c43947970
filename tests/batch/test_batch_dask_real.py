"""Real notebooks, the real jail, on a real Dask cluster (a ``dask scheduler`` and two ``dask
worker`` processes on 127.0.0.1): the gradebook equals the local pool's, and a worker killed in
the middle of a real grade has its submission rerun elsewhere, leaving no process behind.

The class: the reference, an identical copy (from the cache), the untouched notebook, one with an
error in its last cell, a file that is not JSON, and two hostile notebooks: one kills its own
kernel (``kernel_died``: regraded alone before it is recorded), one snoops for the grader's files
and environment, floods its output and leaves daemons behind.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
from batchkit import read_gradebook
from dask_procs import running_workers

from autograder.batch import run_batch
from autograder.grade_options import GradeOptions
from needs import needs

pytestmark = [pytest.mark.slow, pytest.mark.kernel]
pytest.importorskip("distributed")

KILL_KERNEL = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
SNOOP = """import os, subprocess, sys
print('env', sorted(os.environ)[:50])
for path in [{paths}, '/proc/1/environ']:
    try:
        print(open(path).read()[:200])
    except Exception as e:
        print('denied', type(e).__name__)
print('x' * 3_000_000)
for _ in range(5):
    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)
"""


def notebook(*sources: str) -> str:
    return json.dumps(
        {
            "nbformat": 4,
            "nbformat_minor": 5,
            "metadata": {},
            "cells": [
                {
                    "cell_type": "code",
                    "metadata": {},
                    "source": s,
                    "outputs": [],
                    "execution_count": None,
                    "id": f"c{i}",
                }
                for i, s in enumerate(sources)
            ],
        }
    )


@pytest.fixture(scope="module")
@needs("dask")
def cluster(tmp_path_factory):
    with running_workers(tmp_path_factory.mktemp("dask-real")) as procs:
        yield procs


def test_real_class_on_dask_equals_the_local_pool(tmp_path, cluster, assignment):
    examples = assignment.folder / "examples"
    src = tmp_path / "src"
    src.mkdir()
    for name in ("reference", "untouched", "error_in_last_cell"):
        (src / f"{name}.ipynb").write_bytes((examples / f"{name}.ipynb").read_bytes())
    (src / "reference_copy.ipynb").write_bytes((examples / "reference.ipynb").read_bytes())
    (src / "garbage.ipynb").write_bytes(b"{this is not a notebook")
    (src / "hostile_kill_kernel.ipynb").write_text(notebook("x = 1", KILL_KERNEL, "y = 2"))
    paths = ", ".join(repr(str(p)) for p in (assignment.tolerances_path, assignment.rubric_path))
    (src / "hostile_snoop.ipynb").write_text(notebook(SNOOP.replace("{paths}", paths)))

    warm = GradeOptions(kernel_template=True)  # the `batch` command's default: each worker's kernel template
    dask = run_batch(
        src, tmp_path / "dask", assignment=assignment, options=warm, scheduler=cluster.address, progress=False
    )
    local = run_batch(src, tmp_path / "local", assignment=assignment, options=warm, jobs=2, progress=False)

    def comparable(out):
        return [{k: v for k, v in row.items() if k != "execution_s"} for row in read_gradebook(out)]

    assert comparable(tmp_path / "dask") == comparable(tmp_path / "local"), "row for row, score for score"
    book = {r["name"]: r for r in read_gradebook(tmp_path / "dask")}
    assert [(n, book[n]["status"]) for n in sorted(book)] == [
        ("error_in_last_cell", "ok"),
        ("garbage", "unreadable"),
        ("hostile_kill_kernel", "kernel_died"),
        ("hostile_snoop", "ok"),
        ("reference", "ok"),
        ("reference_copy", "ok"),
        ("untouched", "ok"),
    ]
    assert book["reference"]["score"] == book["reference_copy"]["score"] == "100"
    assert (book["reference_copy"]["cached"], dask.cache_hits, local.cache_hits) == ("yes", 1, 1)
    killer = json.loads((tmp_path / "dask" / "hostile_kill_kernel" / "submission.json").read_text())
    assert killer["alone"] is True and killer["first_attempt"]["status"] == "kernel_died", (
        "a kernel death beside a neighbour is regraded alone before it is recorded"
    )
    snoop = (tmp_path / "dask" / "hostile_snoop" / "results.json").read_text()
    secrets = [
        line.strip()
        for line in assignment.tolerances_path.read_text().splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    ]
    assert secrets and not [line for line in secrets if line in snoop], "no line of tolerances.toml came back"
    workers = {
        json.loads((tmp_path / "dask" / n / "submission.json").read_text()).get("worker")
        for n in book
        if book[n]["cached"] == "no" and n != "garbage"
    }
    assert len(workers) == 2, "both Dask workers graded"
    kernels = {
        (out, n): json.loads((tmp_path / out / n / "execution.json").read_text()).get("kernel")
        for out in ("dask", "local")
        for n in book
        if book[n]["cached"] == "no" and n != "garbage"
    }
    if os.geteuid() == 0:  # a Dask worker's kernels come from its templates, as the local pool's do
        assert set(kernels.values()) == {"template"}, kernels


def test_real_grade_survives_its_worker_killed_mid_notebook(tmp_path, cluster, assignment):
    reference = json.loads((assignment.folder / "examples" / "reference.ipynb").read_text())
    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):  # distinct bytes: no cache hit
        nb = {
            **reference,
            "cells": reference["cells"]
            + [{"cell_type": "markdown", "metadata": {}, "id": f"m{i}", "source": f"copy {i}"}],
        }
        (src / f"victim{i}.ipynb").write_text(json.dumps(nb))
    pids = cluster.wait_for_workers(2)
    killed: list[tuple[str, int]] = []

    def kill_the_worker_grading_victim0() -> None:
        from distributed import Client

        with Client(cluster.address, timeout=30) as client:
            deadline = time.monotonic() + 120
            since = None
            while time.monotonic() < deadline:
                where = [w for w, keys in client.processing().items() if any("-victim0-" in str(k) for k in keys)]
                if where and since is None:
                    since = time.monotonic()
                if where and time.monotonic() - since > 2.0:  # its kernel is running by now
                    killed.append((where[0], pids[where[0]]))
                    os.kill(pids[where[0]], signal.SIGKILL)  # a worker process this module started
                    return
                time.sleep(0.1)

    thread = threading.Thread(target=kill_the_worker_grading_victim0)
    thread.start()
    try:
        summary = run_batch(
            src, tmp_path / "out", assignment=assignment, scheduler=cluster.address, progress=False, use_cache=False
        )
    finally:
        thread.join()
    assert killed, "the worker grading victim0 was killed mid-grade"
    cluster.known.update(cluster.wait_for_workers(2).values())
    book = read_gradebook(tmp_path / "out")
    assert [(r["name"], r["status"], r["score"]) for r in book] == [(f"victim{i}", "ok", "100") for i in range(3)], (
        "nothing lost, nothing duplicated"
    )
    record = json.loads((tmp_path / "out" / "victim0" / "submission.json").read_text())
    assert not record["worker"].endswith(f":{killed[0][1]}"), "regraded by another worker process"
    assert summary.executed == 3
    from autograder.batch.dask_executor import TMP_PREFIX

    folder = f"{TMP_PREFIX}{killed[0][1]}"
    left = [p.pid for p in psutil.process_iter(["cmdline"]) if folder in " ".join(p.info["cmdline"] or [])]
    assert left == [], "the killed worker's jail took its kernel with it"
    deadline = time.monotonic() + 30  # swept by the next job or worker that starts on this machine
    while (Path(tempfile.gettempdir()) / folder).exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not (Path(tempfile.gettempdir()) / folder).exists(), "the restarted worker swept the dead one's folder"
