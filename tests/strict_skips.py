"""Strict skips: with ``CI`` set (or ``AUTOGRADER_STRICT_SKIPS=1``) a session in which any test, or
any module at collection, skips for a reason that is not a declared platform limit
(tests/platform_limits.py) fails at its end, listing each such skip. Loaded by tests/conftest.py.

An expected failure (``xfail``, e.g. an open hole's) is not a skip. Under xdist the controller
judges (it receives every worker's reports).
"""

from __future__ import annotations

import os

import pytest

from platform_limits import platform_limit


def strict() -> bool:
    return bool(os.environ.get("CI")) or os.environ.get("AUTOGRADER_STRICT_SKIPS") == "1"


def skip_reason(report) -> str:
    """The reason a skipped report gives (pytest keeps ``(path, line, "Skipped: reason")``)."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


class StrictSkips:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.undeclared: list[tuple[str, str]] = []  # (test id, reason)

    def _seen(self, report) -> None:
        if not report.skipped or hasattr(report, "wasxfail"):
            return
        reason = skip_reason(report)
        if platform_limit(reason) is None:
            self.undeclared.append((report.nodeid, reason))

    def pytest_runtest_logreport(self, report) -> None:
        self._seen(report)

    def pytest_collectreport(self, report) -> None:
        self._seen(report)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.undeclared and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.undeclared:
            return
        terminalreporter.write_sep("=", f"{len(self.undeclared)} skip(s) that are not a declared platform limit")
        for nodeid, reason in self.undeclared:
            terminalreporter.write_line(f"SKIPPED {nodeid}: {reason}")
        terminalreporter.write_line(
            "strict skips (CI / AUTOGRADER_STRICT_SKIPS=1): make these run here, or, if the machine truly "
            "cannot, declare the reason in tests/platform_limits.py with why"
        )


def register(config: pytest.Config) -> None:
    """Install the plugin when strict, and not in an xdist worker (the controller sees every report)."""
    if strict() and not hasattr(config, "workerinput"):
        config.pluginmanager.register(StrictSkips(config), "autograder-strict-skips")
