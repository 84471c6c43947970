"""Asserting that something does not block, without timing it.

A test that asks "does this return, or hang?" runs it in a thread and joins with a bound far above
any honest duration (minutes, so a busy machine never fails it): past the bound it failed by
blocking; within it, the test asserts what it returned or raised. No duration is compared.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

NEVER_S = 120.0
"""Longer than anything that does not block takes, even at several times slower CPU."""


def returns(call: Callable[[], Any], what: str, bound_s: float = NEVER_S) -> Any:
    """``call()``'s result, re-raising what it raised; fails when it is still running after ``bound_s``."""
    done: dict[str, Any] = {}

    def run() -> None:
        try:
            done["value"] = call()
        except BaseException as e:  # noqa: BLE001 - handed to the test's thread below
            done["error"] = e

    thread = threading.Thread(target=run, daemon=True, name=f"returns: {what}")
    thread.start()
    thread.join(bound_s)
    assert not thread.is_alive(), f"{what} blocked: still running after {bound_s:g} s"
    if "error" in done:
        raise done["error"]
    return done["value"]


def ended(thread: threading.Thread, what: str, bound_s: float = NEVER_S) -> None:
    """Join ``thread``; fail when it is still alive after ``bound_s``."""
    thread.join(bound_s)
    assert not thread.is_alive(), f"{what} still running after {bound_s:g} s"
