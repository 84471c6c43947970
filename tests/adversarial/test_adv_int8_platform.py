"""A notebook's int8 products are the grader's on any CPU, and a notebook cannot opt out.

On an x86 CPU without VNNI, ONNX Runtime's default uint8 × int8 kernels saturate
(autograder/ort_platform.py); the grader's own sessions avoid it, so a notebook's session must
too, or its honest numbers would not be re-measured to the bit. A real graded notebook, in each
jail and from each kind of kernel (a fresh one; a template's child where the template holds),
multiplies 255 × 127 over 64 terms with a default session and with a session that asks for the
saturating kernels (``session.x64quantprecision`` = "0"); both must give the exact 2,072,640.
On a CPU with VNNI this passes whatever the jail does (its kernels are exact): the unit tests in
tests/measure/test_ort_platform.py say which kind of CPU ran the suite.
"""

from __future__ import annotations

import os
import shutil

import pytest
from advkit import grade_in_child, require_mode

K = 64
EXACT = 255 * 127 * K
INT8 = f"""
import numpy as np, onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
g = helper.make_graph([helper.make_node("MatMulInteger", ["A", "W"], ["Y"])], "g",
    [helper.make_tensor_value_info("A", TensorProto.UINT8, [1, {K}])],
    [helper.make_tensor_value_info("Y", TensorProto.INT32, [1, 1])],
    [numpy_helper.from_array(np.full(({K}, 1), 127, np.int8), "W")])
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
A = np.full((1, {K}), 255, np.uint8)
off = ort.SessionOptions()
off.add_session_config_entry("session.x64quantprecision", "0")
_record("int8", {{
    "default": int(ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {{"A": A}})[0][0, 0]),
    "opted_out": int(ort.InferenceSession(model, off, providers=["CPUExecutionProvider"]).run(None, {{"A": A}})[0][0, 0]),
}})
"""


@pytest.mark.kernel
@pytest.mark.root
def test_a_notebooks_int8_products_are_exact_in_every_jail_and_kernel(tmp_path, jail_mode, kernel_kind):
    """Each jail and kernel the suite runs (tests/adversarial/conftest.py): ``[auto]`` a fresh
    kernel, ``[auto-template]`` a template's child, ``[fallback]`` the fallback's fresh kernel."""
    g, _ = grade_in_child(
        tmp_path,
        [INT8],
        cell_s=120,
        notebook_s=240,
        timeout_s=400,
        jail_mode=jail_mode,
    )
    try:
        require_mode(g, jail_mode)
        assert g.execution["status"] == "completed", g.execution_brief()
        if kernel_kind == "template" and g.execution["isolation"]["mode"] == "bwrap" and os.geteuid() == 0:
            assert g.execution["kernel"] == "template", g.execution.get("kernel_reason")
        rec = g.record("int8")
        assert rec == {"default": EXACT, "opted_out": EXACT}, rec
    finally:
        shutil.rmtree(g.workspace.parent, ignore_errors=True)
