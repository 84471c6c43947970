"""Where a model quantizes its own input with a fixed scale: the input range calibration fixed.

Pure (onnx + numpy), on a :class:`~autograder.measure.graph_index.GraphIndex`. An *input
quantizer* is a ``QuantizeLinear`` with a constant scale that reads a runtime input of the model,
directly or through ops that pass values through unchanged (``Cast``, ``Identity``, ``Reshape``, …).
It can represent ``[(qmin − zero_point) · scale, (qmax − zero_point) · scale]`` and clips
everything else, so that range is what the model's calibration covers.

Only *live* quantizers count (their output reaches a model output): a ``QuantizeLinear`` nobody
reads changes nothing the model computes, so it cannot widen the calibrated range. When several
live quantizers read the input, a value must fit all of them to pass unclipped: the range is
their intersection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto

from ..graph_index import GraphIndex, attr, input_at

# Ops that pass the model input through unchanged in value (looked through to find its quantizers).
TRANSPARENT = frozenset({"Cast", "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze"})
QRANGE: dict[int, tuple[int, int]] = {
    TensorProto.UINT8: (0, 255),
    TensorProto.INT8: (-128, 127),
    TensorProto.UINT16: (0, 65535),
    TensorProto.INT16: (-32768, 32767),
    TensorProto.UINT4: (0, 15),
    TensorProto.INT4: (-8, 7),
}


@dataclass
class InputQuantizer:
    """One QuantizeLinear on a model input, with the range it represents."""

    input: str
    scale: np.ndarray  # float64, scalar or 1-D along ``axis``
    zero_point: np.ndarray  # float64, same shape as ``scale``
    qmin: int
    qmax: int
    axis: int | None  # None when per tensor
    live: bool

    @property
    def low(self) -> np.ndarray:
        return (self.qmin - self.zero_point) * self.scale

    @property
    def high(self) -> np.ndarray:
        return (self.qmax - self.zero_point) * self.scale

    def to_json(self) -> dict[str, Any]:
        def plain(a: np.ndarray) -> float | list[float]:
            return float(a) if a.ndim == 0 else [float(v) for v in a]

        return {
            "input": self.input,
            "scale": plain(self.scale),
            "zero_point": plain(self.zero_point),
            "qmin": self.qmin,
            "qmax": self.qmax,
            "axis": self.axis,
            "low": plain(self.low),
            "high": plain(self.high),
        }


def _quantizer(ix: GraphIndex, node: onnx.NodeProto, source: str) -> InputQuantizer | None:
    scale = ix.array(input_at(node, 1))
    if scale is None or scale.ndim > 1 or scale.size == 0:
        return None
    zp_name = input_at(node, 2)
    zp = ix.array(zp_name) if zp_name else None
    zp_type = ix.elem_type(zp_name) if zp_name else None
    if zp_type is None:
        zp_type = int(attr(node, "output_dtype", 0)) or TensorProto.UINT8
    if zp_type not in QRANGE:
        return None
    zero = np.zeros(scale.shape) if zp is None else zp.astype(np.float64)
    if zero.shape != scale.shape:
        return None
    qmin, qmax = QRANGE[zp_type]
    axis = int(attr(node, "axis", 1)) if scale.ndim == 1 else None
    return InputQuantizer(source, scale.astype(np.float64), zero, qmin, qmax, axis, ix.is_live(node))


def input_quantizers(ix: GraphIndex) -> list[InputQuantizer]:
    """Every constant-scale QuantizeLinear reading a runtime input (through :data:`TRANSPARENT`
    ops), live or not, in graph order of discovery."""
    found: list[InputQuantizer] = []
    for source in ix.runtime_inputs:
        frontier, seen = [source], set()
        while frontier:
            name = frontier.pop(0)
            for n in ix.consumers.get(name, []):
                if id(n) in seen:
                    continue
                seen.add(id(n))
                if n.op_type == "QuantizeLinear" and n.input[0] == name and ix.is_const(input_at(n, 1)):
                    q = _quantizer(ix, n, source)
                    if q is not None:
                        found.append(q)
                elif n.op_type in TRANSPARENT and n.input[0] == name:
                    frontier.append(n.output[0])
    return found


def input_quantization_facts(ix: GraphIndex) -> dict[str, Any]:
    """``calibrated_input_range`` (``[lo, hi]`` every live input quantizer represents, per tensor;
    per-axis ones contribute their widest feature range, so per-feature detail is in
    ``input_quantization``) and ``input_quantization`` (``live``: each live quantizer's scale,
    zero point and range; ``unused``: how many were ignored because nothing reads them)."""
    qs = input_quantizers(ix)
    live = [q for q in qs if q.live]
    rng = None
    if live:
        lo = max(float(np.min(q.low)) for q in live)
        hi = min(float(np.max(q.high)) for q in live)
        rng = [lo, hi]
    return {
        "calibrated_input_range": rng,
        "input_quantization": {"live": [q.to_json() for q in live], "unused": len(qs) - len(live)},
    }
