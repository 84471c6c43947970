"""A pytest plugin for the suites run inside the simulated Gradescope container
(test_gradescope_container_adversarial.py loads it with ``-p container_plugin``).

- Records which jail the grader chooses there on its own (no ``AUTOGRADER_JAIL``), in
  ``$AUTOGRADER_CONTAINER_REPORT``: the outer test asserts it is the fallback with its layers.
- Deselects the ``jail_mode=fallback`` variant of parametrised tests: inside the container the
  ``auto`` variant already is the fallback, chosen automatically; forcing it again would only run
  every attack twice. Deselects the kernel-template runs (``kernel_kind=template``,
  tests/adversarial/conftest.py) too: Gradescope starts fresh kernels, and the fallback jail never
  holds a template (test_adv_template_wiring.py proves it says why).
"""

from __future__ import annotations

import json
import os

SLOT = 8  # where the adversarial suite's slots start (advkit.SLOT_BASE): clear of `grade` and `batch`


def pytest_sessionstart(session):
    report = os.environ.get("AUTOGRADER_CONTAINER_REPORT")
    if not report or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    from autograder.jail.jail import choose_isolation
    from autograder.jail.users import claim_slot

    assert "AUTOGRADER_JAIL" not in os.environ, "the container must not force a jail mode"
    try:
        # a slot of its own, like every run: a sandbox uid busy elsewhere (RLIMIT_NPROC is per uid)
        # would make the check fail for reasons that are not the container's
        with claim_slot(SLOT) as slot:
            chosen = choose_isolation(slot=slot).record()
    except Exception as e:  # noqa: BLE001 - reported to the outer test, which fails on it
        chosen = {"error": f"{type(e).__name__}: {e}"}
    with open(report, "w") as f:
        json.dump(chosen, f)


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        redundant = params.get("jail_mode") == "fallback" or params.get("kernel_kind") == "template"
        (drop if redundant else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
