"""The hostile-submission suite (tests/adversarial/) run inside the simulated Gradescope
container, where bubblewrap cannot create namespaces and the grader must protect itself with
the fallback jail alone. Not a copy: each test file of tests/adversarial/ (today's and any added
later) is run by pytest inside the container, from this checkout (read-only), with the grader
installed in the image's /opt/autograder venv as setup.sh lays it out; nothing tells the grader
which jail to use (container_plugin.py checks it chose the fallback and deselects the forced
``jail_mode=fallback`` duplicates of the ``auto`` runs).

CPU budget: 1 CPU per inner xdist worker, 2 workers (2.0 CPUs, this machine's cores). The
attacks' time limits (5 s cells, 20 s notebooks) are sized for a normal machine; at Gradescope's
0.5 CPU beside a loaded machine they would measure the load, not the jail, and the fit at
768 MB / 0.5 CPU is measured separately (test_gradescope_container_examples.py, bench/). Memory:
the recommended Gradescope memory per worker, so the kernel's own RLIMIT_AS fires before the
container's OOM killer, as the suite expects.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from container_testlib import FALLBACK_LAYERS, ROOT

from autograder.assignment import load_assignment
from autograder.gradescope.budget import budget
from autograder.gradescope.sim.container import STATE_PARENT, run_container

pytestmark = pytest.mark.slow

ADVERSARIAL = ROOT / "tests" / "adversarial"
FILES = sorted(p.name for p in ADVERSARIAL.glob("test_*.py"))
INNER_WORKERS = 2
CPUS_PER_WORKER = 1.0
FILE_TIMEOUT_S = 1200
TESTTOOLS = ("pytest", "pytest-xdist")
# Skips that are not about the jail: a test that proves nothing on this run says why; a test that
# fakes the host (24 cores through bind mounts in a private mount namespace) cannot make that
# namespace where Docker's seccomp profile denies unshare; it runs the fallback on the host instead.
ALLOWED_SKIPS = ("proves nothing", "unshare is not permitted here")


@pytest.fixture(scope="module")
def testtools(gradescope_image) -> Path:
    """pytest and pytest-xdist with the pins of constraints.txt, beside the image (not in its venv)."""
    target = gradescope_image.folder / "testtools"
    lock = gradescope_image.folder / "testtools.lock"
    import fcntl

    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        if not (target / ".done").is_file():
            shutil.rmtree(target, ignore_errors=True)
            python = gradescope_image.opt / "venv" / "bin" / "python"
            done = subprocess.run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--target",
                    str(target),
                    "-c",
                    str(ROOT / "constraints.txt"),
                    *TESTTOOLS,
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert done.returncode == 0, f"cannot install {TESTTOOLS} for the container:\n{done.stderr[-2000:]}"
            os.chmod(target, 0o755)
            (target / ".done").write_text("ok\n")
    return target


@pytest.mark.parametrize("test_file", FILES)
def test_adversarial_suite_holds_in_gradescopes_container(gradescope_image, testtools, test_file):
    memory_mb = INNER_WORKERS * budget(load_assignment("07-quantization")).memory_mb
    out = Path(tempfile.mkdtemp(prefix="autograder-container-adv-", dir=STATE_PARENT))
    try:
        spec = gradescope_image.container_spec(memory_mb, INNER_WORKERS * CPUS_PER_WORKER)
        spec.binds += [
            (str(ROOT), str(ROOT), "ro"),
            (str(testtools), "/opt/autograder-testtools", "ro"),
            (str(out), "/var/tmp/adv-report", "rw"),
        ]
        env = {
            "PYTHONPATH": f"/opt/autograder/grader:/opt/autograder-testtools:{ROOT / 'tests' / 'gradescope'}",
            "PYTHONDONTWRITEBYTECODE": "1",
            "AUTOGRADER_CONTAINER_REPORT": "/var/tmp/adv-report/jail.json",
        }
        argv = [
            "/opt/autograder/venv/bin/python",
            "-m",
            "pytest",
            str(ADVERSARIAL / test_file),
            "-p",
            "no:cacheprovider",
            "-p",
            "container_plugin",
            "-o",
            "addopts=",
            "-q",
            "-rfEs",
            "-n",
            str(INNER_WORKERS),
            "--dist",
            "loadfile",
            "--junitxml=/var/tmp/adv-report/junit.xml",
        ]
        run = run_container(spec, argv, env=env, cwd="/var/tmp", timeout_s=FILE_TIMEOUT_S)
        tail = run.log[-6000:]
        assert not run.timed_out, f"{test_file} ran past {FILE_TIMEOUT_S} s in the container:\n{tail}"
        jail = json.loads((out / "jail.json").read_text())
        assert jail.get("mode") == "fallback" and FALLBACK_LAYERS <= set(jail.get("layers", [])), (
            f"inside the container the grader chose {jail}"
        )
        suite = ET.parse(out / "junit.xml").getroot()
        cases = suite.iter("testcase")
        failed, skipped, xfailed, passed = [], [], [], 0
        for case in cases:
            name = f"{case.get('classname', '')}::{case.get('name')}"
            bad = case.find("failure") if case.find("failure") is not None else case.find("error")
            skip = case.find("skipped")
            if bad is not None:
                failed.append(f"{name}: {(bad.get('message') or '')[:600]}")
            elif skip is not None and skip.get("type") == "pytest.xfail":
                xfailed.append(f"{name}: {skip.get('message', '')}")
            elif skip is not None:
                skipped.append(f"{name}: {skip.get('message', '')}")
            else:
                passed += 1
        assert run.returncode in (0, 1), f"pytest in the container exited {run.returncode}:\n{tail}"
        assert not failed, f"{test_file} in Gradescope's container:\n" + "\n".join(failed) + f"\n{tail}"
        # a strict xfail is an open hole on record (SECURITY.md, advkit.HOLES): it must name one
        unnamed = [x for x in xfailed if "SECURITY.md, H" not in x]
        assert not unnamed, "expected failures that name no hole in SECURITY.md:\n" + "\n".join(unnamed)
        unexpected = [s for s in skipped if not any(a in s for a in ALLOWED_SKIPS)]
        assert not unexpected, "skipped in the container (the fallback must run them):\n" + "\n".join(unexpected)
        assert passed > 0, f"nothing ran:\n{tail}"
    finally:
        shutil.rmtree(out, ignore_errors=True)
