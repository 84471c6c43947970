"""Where a kernel template may be used, and where a run must keep today's fresh kernel."""

from __future__ import annotations

import pytest

from autograder.kernel_template import template
from autograder.jail.jail import Isolation
from autograder.jail.users import SandboxUser

SLOT = SandboxUser("autograder-sb0", 990, 990)

CASES = [
    # (grader is root, isolation mode, sandbox user, usable)
    (True, "bwrap", SLOT, True),
    (True, "fallback", SLOT, False),  # Gradescope's container: no namespaces, no mounts
    (True, "none", None, False),
    (True, "bwrap", None, False),  # no slot uid to drop to
    (False, "bwrap", None, False),  # bwrap in a user namespace: the template cannot mount or change uid
    (False, "fallback", None, False),
]


@pytest.mark.parametrize(("root", "mode", "user", "usable"), CASES)
def test_a_template_needs_root_namespaces_and_a_slot_uid(monkeypatch, root, mode, user, usable):
    monkeypatch.setattr(template.os, "geteuid", lambda: 0 if root else 1000)
    why = template.unavailable_reason(Isolation(mode, user=user))
    assert (why is None) == usable, why
    if not usable:
        assert "kernel template needs" in why


@pytest.mark.parametrize(("value", "on"), [("1", True), ("", False), ("0", False), ("yes", False), (" 1 ", True)])
def test_the_prototype_is_off_unless_asked_for(monkeypatch, value, on):
    monkeypatch.setenv(template.SWITCH, value)
    assert template.enabled() is on


def test_the_prototype_is_off_by_default(monkeypatch):
    monkeypatch.delenv(template.SWITCH, raising=False)
    assert template.enabled() is False
