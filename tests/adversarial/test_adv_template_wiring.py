"""``AUTOGRADER_KERNEL_TEMPLATE=1`` routes a front end's kernel through the template where the jail
allows one, and only there: in bwrap mode as root the kernel is a template's child; in the fallback
jail (Gradescope's container: no namespaces) it is fresh and execution.json says why. The whole
suite under ``make test-template`` checks the same of every graded notebook
(``advkit.require_kernel_asked``)."""

from __future__ import annotations

import os
import shutil

import pytest
from advkit import grade_in_child, require_mode

IDENTITY = "import os\nprint(os.getpid())"


@pytest.mark.kernel
@pytest.mark.root
def test_the_switch_makes_a_template_kernel_where_it_holds_and_a_fresh_one_elsewhere(tmp_path, jail_mode):
    g, _ = grade_in_child(
        tmp_path,
        [IDENTITY],
        cell_s=60,
        notebook_s=120,
        timeout_s=300,
        jail_mode=jail_mode,
        env={"AUTOGRADER_KERNEL_TEMPLATE": "1"},
    )
    try:
        require_mode(g, jail_mode)
        assert g.execution["status"] == "completed", g.execution_brief()
        if g.execution["isolation"]["mode"] == "bwrap" and os.geteuid() == 0:
            assert (g.execution["kernel"], g.execution["kernel_reason"]) == ("template", None)
        else:
            assert g.execution["kernel"] == "fresh"
            assert "kernel template needs" in (g.execution["kernel_reason"] or ""), g.execution["kernel_reason"]
    finally:
        shutil.rmtree(g.workspace.parent, ignore_errors=True)
