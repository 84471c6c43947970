"""Whether the fallback jail works here is checked as a uid of its own, and only a success is kept.

A slot's sandbox uid belongs to the run that holds the slot: that run's reaper kills every process
of the uid, a check of another process included. Checked as the slot's uid, a check killed that
way read "the fallback is unavailable", and the verdict was cached for the process: a batch worker
then refused every later submission. The check now runs as ``jail.CHECK_USER`` (no reaper's uid),
and a failed check is made again at the next run.
"""

from __future__ import annotations

import os
import threading

import pytest

from autograder.jail import jail, users
from autograder.jail.users import SandboxUser


@pytest.fixture
def fresh_checks(monkeypatch):
    monkeypatch.setattr(jail, "_FALLBACK_WORKS", {})


def test_only_a_successful_check_is_kept(monkeypatch, fresh_checks):
    answers = [({"applied": []}, "the check was killed"), ({"applied": ["seccomp"]}, "")]
    calls = []

    def once(uid, gid):
        calls.append((uid, gid))
        return answers[min(len(calls), len(answers)) - 1]

    monkeypatch.setattr(jail, "_fallback_check_once", once)
    assert jail._fallback_check(5, 5)[1] == "the check was killed"
    assert jail._fallback_check(5, 5) == ({"applied": ["seccomp"]}, "")  # checked again, not the cached failure
    assert jail._fallback_check(5, 5) == ({"applied": ["seccomp"]}, "")
    assert calls == [(5, 5), (5, 5)], "a success is kept for the process"


def test_the_check_runs_as_the_check_user_never_as_the_slots(monkeypatch, fresh_checks):
    slot_user, check_user = SandboxUser("autograder-sb3", 5003, 5003), SandboxUser(jail.CHECK_USER, 6000, 6000)
    seen = []
    monkeypatch.setattr(jail, "_check_user", lambda slot: check_user)
    monkeypatch.setattr(jail, "_fallback_check", lambda uid, gid: (seen.append((uid, gid)), ({"applied": []}, ""))[1])
    iso = jail._fallback_isolation(slot_user, True, [])
    assert iso is not None and iso.user == slot_user, "the kernel still runs as the slot's uid"
    assert seen == [(6000, 6000)]


@pytest.mark.root
@pytest.mark.kernel
def test_a_slots_reaper_running_meanwhile_does_not_make_the_fallback_unavailable(monkeypatch, fresh_checks):
    """The real check, as root, while a reaper kills every process of the slot's uid in a loop (a
    slot of this test's own, held with its lock, so no other run's kernel is in it)."""
    if os.geteuid() != 0:
        pytest.skip("sandbox uids need root")
    monkeypatch.setenv("AUTOGRADER_JAIL", "fallback")
    with users.claim_slot(40) as slot:
        slot_user = users.ensure_user(slot)
        stop = threading.Event()

        def reap() -> None:
            while not stop.is_set():
                users.reap_user(slot_user, timeout_s=0.05)

        reaper = threading.Thread(target=reap, daemon=True)
        reaper.start()
        try:
            iso = jail.choose_isolation(slot=slot)
        finally:
            stop.set()
            reaper.join(timeout=10)
    assert iso.mode == "fallback" and iso.user == slot_user, iso.warnings
