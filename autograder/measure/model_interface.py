"""The inputs and outputs an assignment's model must have, checked on the graph and on real outputs.

An assignment declares its contract as data, e.g. assignment 07::

    ModelInterface(inputs=(TensorSpec("X", "float32", (None, 2)),),
                   outputs=(TensorSpec("label", "int64", (None,)),
                            TensorSpec("probabilities", "float32", (None, 2))))

``None`` is the free batch dimension N; a model may have several inputs (each fed by name).
:meth:`ModelInterface.problems` reads the declared types of a graph (before anything runs);
:meth:`ModelInterface.output_problem` checks one array that ONNX Runtime returned for a batch of
``n`` rows. Both return sentences for the student.

``adapt=True`` lets the model worker (the one place that feeds models:
``autograder/measure/model_worker.py``, ``_feeds`` and ``_run_all``) still run a model that
deviates from the contract in a way that does not change what it computes, so that the deviation
costs the points of the interface check and nothing else:

- inputs of other names: fed by position when the model has as many inputs (one input named
  ``float_input``, the name of ONNX Runtime's own tutorial, instead of ``X``);
- a fixed batch dimension (``FloatTensorType([1, 30])``): each set fed in calls of that many rows
  (the last call padded with copies of its last row), the outputs joined back;
- float inputs of another precision: cast to the float type the model declares (a float64 export
  gets float64 data), and float outputs of another precision are accepted;
- outputs of other names or in another order: each output the model does not name is the first
  other output of its type and shape, else the one at its position;
- a sequence of ``{class: probability}`` maps (scikit-learn's ZipMap): an ``[N, classes]`` array.

The interface facts still report every deviation, and the worker lists what it adapted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str  # a NumPy dtype name: "float32", "int64"
    shape: tuple[int | None, ...]  # None: the batch dimension N

    def shape_text(self) -> str:
        return "[" + ", ".join("N" if d is None else str(d) for d in self.shape) + "]"


@dataclass(frozen=True)
class ModelInterface:
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    adapt: bool = False  # run what deviates harmlessly (see the module's docstring)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            side: [[s.name, s.dtype, list(s.shape)] for s in getattr(self, side)] for side in ("inputs", "outputs")
        }
        if self.adapt:
            data["adapt"] = True
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ModelInterface":
        def specs(side):
            return tuple(TensorSpec(n, d, tuple(shape)) for n, d, shape in data[side])

        return cls(specs("inputs"), specs("outputs"), bool(data.get("adapt", False)))

    # ── the graph's declared types ──────────────────────────────────────────────────────────────

    def problems(self, model) -> list[str]:
        g = model.graph
        consts = {t.name for t in g.initializer}
        declared_inputs = {i.name: i for i in g.input if i.name not in consts}
        declared_outputs = {o.name: o for o in g.output}
        problems = []
        want_in = [s.name for s in self.inputs]
        if list(declared_inputs) != want_in:
            problems.append(f"inputs are {_names(declared_inputs)}, expected exactly {want_in}")
        want_out = [s.name for s in self.outputs]
        if set(declared_outputs) != set(want_out):
            hint = ""
            if any(_kind(o) == "sequence_type" for o in declared_outputs.values()):
                hint = " (hint: an output is a sequence of maps: ZipMap is on; convert with options={'zipmap': False})"
            problems.append(f"outputs are {_names(declared_outputs)}, expected {want_out}{hint}")
        inputs = dict(declared_inputs)
        if self.adapt and len(declared_inputs) == len(self.inputs):  # the worker feeds them by position
            unnamed = [vi for name, vi in declared_inputs.items() if name not in want_in]
            inputs.update(zip([n for n in want_in if n not in declared_inputs], unnamed))
        for spec, side in [(s, inputs) for s in self.inputs] + [(s, declared_outputs) for s in self.outputs]:
            if spec.name in side:
                p = _declared_problem(spec, side[spec.name], is_input=side is inputs, adapt=self.adapt)
                if p:
                    problems.append(p)
        return problems

    # ── what ONNX Runtime returned ──────────────────────────────────────────────────────────────

    def output_problem(self, spec: TensorSpec, value: Any, n: int) -> str | None:
        want = tuple(n if d is None else d for d in spec.shape)
        if value is None:
            return f"output {spec.name} is missing on a batch of {n} rows, expected {spec.dtype} of shape {want}"
        if not isinstance(value, np.ndarray):
            return f"output {spec.name} is a {type(value).__name__}, expected {spec.dtype} of shape {want}"
        same_type = value.dtype == np.dtype(spec.dtype) or (
            self.adapt and value.dtype.kind == "f" and np.dtype(spec.dtype).kind == "f"
        )
        if not same_type or value.shape != want:
            return (
                f"output {spec.name} is {value.dtype} of shape {tuple(value.shape)} on a batch of {n} rows, "
                f"expected {spec.dtype} of shape {want}"
            )
        return None


def _names(declared: dict) -> list[str]:
    return [n[:40] for n in list(declared)[:5]]


def _kind(vi) -> str:
    return vi.type.WhichOneof("value") or "unknown"


def _declared_problem(spec: TensorSpec, vi, is_input: bool, adapt: bool = False) -> str | None:
    from onnx import helper

    what = (
        f"{'input' if is_input else 'output'} {vi.name[:40]}"  # the model's name: an input fed by position has another
    )
    if _kind(vi) != "tensor_type":
        return f"{what} is a {_kind(vi).replace('_type', '')}, expected a {spec.dtype} tensor"
    tt = vi.type.tensor_type
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type)).name
    except Exception:  # noqa: BLE001 - a type NumPy has no dtype for: named by its number
        dtype = f"type {tt.elem_type}"
    if dtype != spec.dtype:
        return f"{what} is {dtype}, expected {spec.dtype}"
    if not tt.HasField("shape"):
        return None  # unknown shape: the run decides
    dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
    shown = "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
    mismatch = any(w is not None and d is not None and d != w for d, w in zip(dims, spec.shape))
    if len(dims) != len(spec.shape) or mismatch:
        return f"{what} has shape {shown}, expected {spec.shape_text()}"
    fixed = [d for d, w in zip(dims, spec.shape) if w is None and d is not None]
    if is_input and fixed and adapt:
        return (
            f"{what} has a fixed batch size {fixed[0]}, expected a free dimension N (a caller sends "
            f"any number of rows in one call; the grader fed it {fixed[0]} row(s) per call)"
        )
    if is_input and fixed:
        return (
            f"{what} has a fixed batch size {fixed[0]}, expected a free dimension N "
            "(the grader runs the whole test set in one call)"
        )
    return None
