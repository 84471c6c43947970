"""How every ONNX Runtime session of a grade computes: the grader's own and the notebook's alike.

A grade must not depend on which CPU graded it. ONNX Runtime's int8 matrix products do, by
default: on x86 CPUs without VNNI (AVX2, or AVX-512 without VNNI) its uint8 × int8 kernels add
the products pairwise in a saturating 16-bit register, so a model whose uint8 activations meet
large int8 weights (a static QDQ model, fused into integer kernels at ``ORT_ENABLE_EXTENDED`` and
above; an explicit ``MatMulInteger``) gives other outputs there than on a CPU with VNNI, whose
products are exact. Measured on one such CPU: the same static model of lesson 07 drifted 0.48 from
its fp32 model instead of 0.09, and a ``MatMulInteger`` of 255 × 127 over 64 terms gave 1,048,544
instead of 2,072,640.

:data:`SESSION_CONFIG` turns on ONNX Runtime's own remedy, ``session.x64quantprecision``: on the
CPUs that saturate, a graph transformer rewrites each int8 weight to uint8 (exact uint8 × uint8
kernels); elsewhere it changes nothing. Both sides get it:

- the grader: :func:`session_options` is where every session of the grader starts (the model
  worker's, the reference operators');
- the notebook: the jail's ``sitecustomize`` (:mod:`autograder.jail.jail_site`) puts the same
  entries into every ``InferenceSession`` the notebook creates, whatever its own options say
  (the entries travel in ``$AUTOGRADER_ORT_SESSION_CONFIG``, :func:`config_text`), so the numbers
  a notebook reports are re-measured to the bit on any grading machine.

What it cannot reach (tests/measure/test_ort_platform.py measures each): the rewrite is a graph
transformer, so a session below ``ORT_ENABLE_EXTENDED`` (a lesson whose ``[model_worker]
graph_optimization_level`` is ``ORT_DISABLE_ALL`` or ``ORT_ENABLE_BASIC``) still runs an explicit
``MatMulInteger`` or ``QLinearConv`` on the default kernels; and the QOperator format's
``QLinearMatMul`` is left out at every level. A QDQ model below ``ORT_ENABLE_EXTENDED`` runs its
``DequantizeLinear`` → float ``MatMul`` as written, which is exact on every CPU.

Standard library only at import: ONNX Runtime is imported by :func:`session_options` alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# entry → value; every entry is one ONNX Runtime documents as a session configuration key
SESSION_CONFIG: Mapping[str, str] = {"session.x64quantprecision": "1"}


def config_text(config: Mapping[str, str] = SESSION_CONFIG) -> str:
    """The entries as the jail's ``sitecustomize`` reads them (a JSON object of strings)."""
    return json.dumps(dict(config), sort_keys=True)


def apply_config(options: Any, config: Mapping[str, str] = SESSION_CONFIG) -> None:
    """Put ``config`` into ``options`` (an ``onnxruntime.SessionOptions``), replacing any value it had."""
    for key, value in config.items():
        options.add_session_config_entry(key, value)


def session_options(optimization_level: str = "ORT_DISABLE_ALL") -> Any:
    """Fresh ``onnxruntime.SessionOptions`` for a grader's session: one thread for both pools,
    sequential execution, ``optimization_level`` (a name of ``onnxruntime.GraphOptimizationLevel``;
    a lesson's is checked by :mod:`autograder.measure.model_policy`), warnings and errors only, and
    :data:`SESSION_CONFIG`."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, optimization_level)
    options.log_severity_level = 3
    apply_config(options)
    return options
