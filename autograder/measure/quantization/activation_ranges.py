"""What each activation quantizer's static range was calibrated on (the worker's ``activation_ranges``).

Static (QDQ) calibration fixes one range per quantized activation, not only the input's: MinMax
records the smallest and largest value each tensor took on the calibration rows and writes
``scale = (rmax − rmin) / (qmax − qmin)`` and ``zero_point = round(qmin − rmin / scale)``. A range
set by rows the contract forbids (``X_test`` among the calibration rows) shows at any tensor whose
extreme one of those rows holds, even when the input's ends happen to be training rows.

:func:`activation_ranges` runs in the model worker (the models are the student's: never parsed
by the grader's own process). For the quantized ``model`` and its float ``baseline`` (the
student's fp32 model it was derived from) it lists every activation ``QuantizeLinear`` of
``model`` with a constant per-tensor scale whose input is a tensor the baseline computes, with
that tensor's ``[min, max]`` in the baseline on each **public** input set of the job (names
starting ``public_``: the contract's own rows, never the grader's hidden ones). The judgement
(which rows could have set each range) is the lesson's (``grading/provenance.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from ..graph_index import GraphIndex, input_at
from .input_quant import QRANGE

PUBLIC_PREFIX = "public_"
MAX_TENSORS = 64  # the lesson's MLP quantizes 7; a bound on the extra outputs one job computes


def _constant(ix: GraphIndex, name: str | None) -> np.ndarray | None:
    return ix.array(name) if name else None


def activation_quantizers(model: onnx.ModelProto, produced: set[str]) -> list[dict[str, Any]]:
    """The activation ``QuantizeLinear`` nodes of ``model`` with constant per-tensor parameters
    whose input is one of ``produced`` (tensors a node of the baseline computes)."""
    ix = GraphIndex(model)
    out = []
    for node in model.graph.node:
        if node.op_type != "QuantizeLinear" or node.domain not in ("", "ai.onnx", "com.microsoft"):
            continue
        if not ix.is_live(node):
            continue
        tensor = input_at(node, 0)
        scale, zp = _constant(ix, input_at(node, 1)), _constant(ix, input_at(node, 2))
        if tensor not in produced or scale is None or scale.size != 1 or (zp is not None and zp.size != 1):
            continue
        elem = ix.const_type(input_at(node, 2)) if zp is not None else onnx.TensorProto.UINT8
        if elem not in QRANGE:
            continue
        qmin, qmax = QRANGE[elem]
        out.append(
            {
                "tensor": tensor,
                "scale": float(scale.reshape(())),
                "zero_point": int(zp.reshape(())) if zp is not None else 0,
                "qmin": qmin,
                "qmax": qmax,
            }
        )
        if len(out) >= MAX_TENSORS:
            break
    return out


def activation_ranges(baseline: onnx.ModelProto, model: onnx.ModelProto, sets: dict, make_session) -> dict[str, Any]:
    """``{"quantizers": [{tensor, scale, zero_point, qmin, qmax, ranges: {set: [min, max]}}]}``
    (see the module); ``make_session(model)``: the worker's session factory."""
    produced = {o for n in baseline.graph.node for o in n.output if o}
    quantizers = activation_quantizers(model, produced)
    if not quantizers:
        return {"quantizers": []}
    probe = onnx.ModelProto()
    probe.CopyFrom(baseline)
    have = {o.name for o in probe.graph.output}
    for q in quantizers:
        if q["tensor"] not in have:
            probe.graph.output.append(onnx.helper.make_empty_tensor_value_info(q["tensor"]))
            have.add(q["tensor"])
    session = make_session(probe)
    inputs = [i.name for i in session.get_inputs()]
    names = [o.name for o in session.get_outputs()]
    for set_name, feed in sets.items():
        if not set_name.startswith(PUBLIC_PREFIX) or len(inputs) != 1 or len(feed) != 1:
            continue
        values = dict(zip(names, session.run(None, {inputs[0]: next(iter(feed.values()))})))
        for q in quantizers:
            v = np.asarray(values[q["tensor"]], dtype=np.float64)
            if v.size and np.all(np.isfinite(v)):
                q.setdefault("ranges", {})[set_name] = [float(v.min()), float(v.max())]
    return {"quantizers": quantizers}
