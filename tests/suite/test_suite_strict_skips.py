"""Strict skips (tests/strict_skips.py, tests/platform_limits.py): in CI a session fails, listing
each skip whose reason is not a declared platform limit, at collection or in a test, with or
without xdist; an expected failure is not a skip; outside CI nothing changes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from platform_limits import LIMITS, platform_limit

TESTS = Path(__file__).resolve().parents[1]

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
import strict_skips
def pytest_configure(config):
    strict_skips.register(config)
"""
SUITE = {
    "test_a.py": """
import pytest
def test_a_declared_limit():
    pytest.skip("not an x86 CPU with AVX2: ONNX Runtime's x86 int8 kernels do not apply")
def test_an_undeclared_skip():
    pytest.skip("chromium is not installed (apt-get install -y chromium)")
@pytest.mark.xfail(strict=True, reason="an open hole")
def test_an_open_hole():
    assert False
def test_passes():
    pass
""",
    "test_b.py": """
import pytest
pytest.importorskip("a_module_nobody_installed")
def test_never_collected():
    pass
""",
}


def run(tmp_path: Path, strict: bool, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name, text in SUITE.items():
        (tmp_path / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "AUTOGRADER_STRICT_SKIPS", "PYTEST_ADDOPTS")}
    if strict:
        env["AUTOGRADER_STRICT_SKIPS"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *args, str(tmp_path)]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_an_undeclared_skip_fails_the_session_in_ci_and_is_listed(tmp_path, xdist):
    done = run(tmp_path, True, *xdist)
    assert done.returncode == 1, done.stdout[-3000:]
    assert "2 skip(s) that are not a declared platform limit" in done.stdout, done.stdout[-3000:]
    assert "test_a.py::test_an_undeclared_skip: chromium is not installed" in done.stdout
    assert "test_b.py: could not import 'a_module_nobody_installed'" in done.stdout
    assert "test_a_declared_limit" not in done.stdout.split("not a declared platform limit", 1)[1]
    assert "test_an_open_hole" not in done.stdout.split("not a declared platform limit", 1)[1]


def test_outside_ci_a_skip_is_only_a_skip(tmp_path):
    done = run(tmp_path, False)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "platform limit" not in done.stdout


@pytest.mark.parametrize(
    "reason, declared",
    [
        ("this CPU's int8 products are exact (VNNI): nothing saturates", True),
        ("Landlock is not available on this kernel", True),
        ("the fallback jail cannot start a kernel on this machine: the sandbox uid cannot run .venv/bin/python", False),
        ("needs a root grader (mounts, sandbox uids, chown)", False),
        ("chromium is not installed (apt-get install -y chromium)", False),
        ("mmdebstrap is missing (apt-get install mmdebstrap; `make setup` installs it)", False),
    ],
)
def test_the_declared_limits(reason, declared):
    assert (platform_limit(reason) is not None) is declared
    assert all(why.strip() for why in LIMITS.values())
