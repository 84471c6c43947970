"""What a lesson's grading plugin may use from the core: the one declared surface.

A lesson's ``grading/`` package (and ``reference/<id>/make_examples.py`` made by
``autograder new-assignment``) imports from the core only through this module::

    from autograder.lesson import Arg, Expect, ProbeCase, measure_functions

Everything else under ``autograder`` is internal and free to move; a rule test
(tests/package/test_lesson_surface.py) fails on any other ``autograder.<x>`` import in
``assignments/*/grading`` or in the scaffold's templates. This module only hands names on: it
defines no behaviour, and no module of the core imports it. A name that imports ONNX Runtime or
nbformat (``ort_node``, ``ort_model``, ``quantization_ops``, ``Mistake``, ``examples_from``) is
imported when first asked for, so a plugin that does not use it does not pay for it.

Errors
    ``AutograderError``: the grader's own fault (a bug in a lesson's cases); raise it, never catch
    a student's error as one::

        raise AutograderError(f"zero point {zp} outside {dtype}")

    ``UnsafeFileError``: a student's artifact that may not be read (missing, a symlink, too
    large); catch it and record the reason as a fact::

        try:
            data = read_model_bytes(workspace, assignment.artifacts["model"])
        except UnsafeFileError as e:
            return {"error": str(e)}

Hidden data (the deployment's secret, never a seed in the lesson)
    ``hidden_secret``: the module; ``hidden_secret.current()`` is the secret in effect,
    ``hidden_secret.generator(stream)`` a generator of the grader's fixed hidden rows,
    ``hidden_secret.submission_generator(stream)`` one that differs per submission,
    ``hidden_secret.current_submission()`` and ``hidden_secret.NO_SUBMISSION`` the submission key::

        rows = hidden_secret.generator("12-my-lesson/rows").normal(0.0, 3.0, (32, 10))

    ``HiddenSecret``: the secret's type, a cache key for data derived from it::

        @lru_cache(maxsize=4)
        def _rows(secret: HiddenSecret) -> np.ndarray: ...

    ``current``: ``hidden_secret.current``, by name: ``_rows(current())``.

Probe cases and their results (what the kernel is asked to call, and what came back)
    ``ProbeCase``: one call of a contracted function, with its group (a rubric part)::

        ProbeCase("softmax/rows/0", "softmax", (Arg.array(x),), {}, "rows")

    ``Arg``: an argument the kernel rebuilds: ``Arg.array(x)``, ``Arg.scalar(v)``, ``Arg.list(a)``,
    ``Arg.dtype("uint8")``, ``Arg.strings(items)``, ``Arg.file(data, name)``; ``case.raw(0)`` gives
    the first one back in the grader.

    ``ProbeResult``: what the probe returned (``probe.ran``, ``probe.cases[case.id]``), the
    ``ctx.probe`` of ``measure(ctx)``.

Comparing answers (the ``functions`` section)
    ``measure_functions``: every call of ``ctx.cases`` against an expectation per function::

        measure_functions(ctx.cases, ctx.probe, {"softmax": expect_softmax})

    ``Expect``: the reference's answer with its dtype, tolerance or step::

        Expect(ort_node("Softmax", case.raw(0), axis=-1), tolerance=Tolerance(rtol=1e-5, atol=1e-7))

    ``Tolerance``: how far a float may be from the reference: ``Tolerance(rtol=1e-5, atol=1e-7)``.

    ``FLOAT32_ROUNDING``: the tolerance of a few float32 roundings, the default:
    ``Expect(y, tolerance=FLOAT32_ROUNDING)``.

    ``compare``: the module, for ties in rounding: ``compare.near_tie(x / scale)``,
    ``compare.tie_offsets(x / scale, expected, lo=0, hi=255)``.

    ``STEP``: the unit of an integer answer (one quantization step): ``Expect(q, unit=STEP)``.

    ``shape_words``: a shape told without its hidden sizes: ``shape_words((8, 10))`` is ``"a 2-d shape"``.

References computed by ONNX Runtime, in the grader's process, on the grader's own inputs
    ``ort_node``: one operator on arrays: ``ort_node("Softmax", x, axis=-1)``.

    ``ort_model``: a whole ``onnx.ModelProto``: ``ort_model(model, {"x": x})`` (a list of outputs).

    ``quantization_ops``: lesson 07's quantize/dequantize references
    (``quantization_ops.ort_quantize(x, scale, zero_point, np.uint8)``).

The student's models (read safely, run in the limited model worker, never in the grader)
    ``read_model_bytes``: an artifact's bytes, or ``UnsafeFileError``::

        data = read_model_bytes(workspace, assignment.artifacts["model"])

    ``run_model_worker``: the model run on named input sets in a limited child process::

        run = run_model_worker(data, inputs={"hidden": rows}, interface=INTERFACE, facts=("graph",),
                               children=ctx.children)

    ``load_json``: a JSON file the notebook wrote, parsed safely (no symlink, size-capped), or
    ``UnsafeFileError``: ``load_json(workspace, "artifacts/profile.json")``.

    ``WorkerRun``: what it returned: ``run.ok``, ``run.reason``, ``run.result["facts"]``,
    ``run.outputs["hidden__y"]``.

    ``ModelInterface``, ``TensorSpec``: the inputs and outputs a model must declare::

        INTERFACE = ModelInterface(inputs=(TensorSpec("x", "float32", (None, 10)),),
                                   outputs=(TensorSpec("y", "float32", (None, 10)),))

    ``ModelPolicy``: what the worker allows (extra operators, optimisation level, size limits):
    ``ModelPolicy(extra_operators=frozenset({"com.microsoft.QGemm"}))``.

    ``qualified_op``: a node's operator with its domain: ``qualified_op(node)`` is
    ``"com.microsoft.Gelu"`` or ``"Conv"``.

    ``MeasuringChildren``, ``measure_jobs``: the submission's warm measuring children
    (``ctx.children``) and how many may run at once: ``measure_jobs()``.

Metrics (facts, never verdicts)
    ``metrics``: the module: ``metrics.max_abs_dp(p, r)``, ``metrics.max_rel_drift(p, r)``,
    ``metrics.size_ratio(model_bytes, baseline_bytes)``, ``metrics.latency_ratio(model_ms, baseline_ms)``,
    ``metrics.coverage(x, lo, hi)``.

    ``probabilities``: the module: ``probabilities.accuracy(p, y)``,
    ``probabilities.label_agreement(p, r)``, ``probabilities.probability_problems(p)``.

The ``RESULTS`` a notebook reports (checked against what the grader measured)
    ``check_reported``: the reported values, per dotted key, against the grader's own::

        check_reported(reported, {"accuracy": (measured, 0.01), "size_mb": Expected(size, 0.05, unit="MB")})

    ``Expected``: the grader's value of one reported number and how it is judged:
    ``Expected(measured, Tolerance(rtol=0.1), positive=True, hint=Hint("time", "time the model itself"))``.

    ``Hint``: an explanation appended to a mismatch: ``Hint("time", "time the model itself")``.

    ``is_number``: a real number that is not a bool: ``is_number(reported.get("accuracy"))``.

What a student may be told (the lesson's leak budget)
    ``exception_name``: an exception's type, or the words that hide a notebook's own type:
    ``exception_name(type(e).__name__)``.

    ``run_failure_words``: ONNX Runtime's failure told as one of a few categories:
    ``run_failure_words(run.reason)``.

Example submissions (``reference/<id>/make_examples.py``)
    ``Mistake``: one realistic edit of one cell of the solution, and the check that loses points::

        Mistake("no_shift.ipynb", "softmax", "softmax without the shift", "why", (("old", "new"),))

    ``Variant``: a valid way to write the solution that is not the reference's (full marks, every
    self-check passes)::

        Variant("loop_softmax.ipynb", "softmax with a loop", "why it is right", (("old", "new"),))

    ``Gamed``: a submission that games the grader (constants or the README's values in ``RESULTS``,
    an echo, only the printing cells); its ``expected_examples.toml`` row says ``gamed = true`` and
    the ``max_score`` it may reach::

        Gamed("typed_results.ipynb", "RESULTS typed in", "why it earns little", (("old", "new"),))

    ``examples_from``: the example notebooks: ``examples_from(solution, student, MISTAKES + GAMED)``.

Probe helpers
    ``Arg.artifact(relpath)`` and ``Arg.session(path_arg, intra_op_num_threads=None,
    inter_op_num_threads=None, graph_optimization_level=None)`` are on ``Arg``: a file the notebook
    wrote (the call is refused as status ``bad_artifact``, with the reason, when it is missing, not a
    file or leads outside the working directory), and a session the probe's own code opens::

        ProbeCase("profile", "summarize", (Arg.artifact("artifacts/profile.json"),))
        ProbeCase("run", "predict", (Arg.session(Arg.artifact("artifacts/mlp.onnx"), intra_op_num_threads=1), Arg.array(x)))

    A result may be a dict keyed by tuples (``{(8, 2): 0.4}``), and a returned session arrives as a
    ``SessionDescription``: its inputs, output names, providers, node count and the options the
    notebook asked for (``intra_op_num_threads`` 0 means ONNX Runtime's default, though the jail ran
    it with its own size)::

        d = ctx.probe.cases["session/2"].value
        ok = isinstance(d, SessionDescription) and d.intra_op_num_threads == 2

    ``timing_honesty``: the module (``timing_honesty.WINDOW``, the calibrated factor). The student's
    timing function against the probe's own timer in the same kernel, moments apart:
    ``latency_pairing`` builds the pairing of ``latency_ms(session, x)``, ``table_pairing`` that of
    ``latency_table(path, batch_sizes, threads)``; add ``pairing.cases()`` to ``probe_cases()``, then
    ``measure_pairing`` gives the facts (``worst_ratio``, per entry the median ratio over pairs)::

        LATENCY = latency_pairing("latency/basic", "latency_ms", Arg.session(MODEL, intra_op_num_threads=1), Arg.array(x))
        facts = measure_pairing(LATENCY, ctx.probe)   # judge facts["worst_ratio"] against timing_honesty.WINDOW
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import hidden_secret
from .errors import AutograderError, UnsafeFileError
from .hidden_secret import HiddenSecret, current
from .leak_budget import exception_name, run_failure_words
from .measure import compare, metrics, probabilities
from .measure.compare import FLOAT32_ROUNDING, Expect, Tolerance
from .measure.failure import STEP, shape_words
from .measure.functions import measure_functions
from .measure.model_interface import ModelInterface, TensorSpec
from .measure.model_policy import ModelPolicy, qualified_op
from .measure.onnx_load import read_model_bytes, run_model_worker
from .measure.reported import Expected, Hint, check_reported, is_number
from .measure.warm_pool import MeasuringChildren, measure_jobs
from .measure.worker_process import WorkerRun
from .measure import timing_honesty
from .measure.timing_honesty import latency_pairing, measure_pairing, table_pairing
from .probe_format import Arg, ProbeCase, ProbeResult, SessionDescription
from .safe_files import load_json

if TYPE_CHECKING:  # imported when first asked for (module __getattr__ below): ONNX Runtime, nbformat
    from .authoring.example_edits import Gamed, Mistake, Variant, examples_from
    from .measure.quantization import reference_ops as quantization_ops
    from .measure.reference_ops import ort_model, ort_node

# name → (module, attribute or None for the module itself), imported when first asked for
_LAZY: dict[str, tuple[str, str | None]] = {
    "ort_node": ("autograder.measure.reference_ops", "ort_node"),
    "ort_model": ("autograder.measure.reference_ops", "ort_model"),
    "quantization_ops": ("autograder.measure.quantization.reference_ops", None),
    "Mistake": ("autograder.authoring.example_edits", "Mistake"),
    "Variant": ("autograder.authoring.example_edits", "Variant"),
    "Gamed": ("autograder.authoring.example_edits", "Gamed"),
    "examples_from": ("autograder.authoring.example_edits", "examples_from"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, attribute = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


__all__ = [
    # errors
    "AutograderError",
    "UnsafeFileError",
    # hidden data
    "hidden_secret",
    "HiddenSecret",
    "current",
    # probe cases and their results
    "Arg",
    "ProbeCase",
    "ProbeResult",
    # comparing answers
    "measure_functions",
    "Expect",
    "Tolerance",
    "FLOAT32_ROUNDING",
    "compare",
    "STEP",
    "shape_words",
    # references computed by ONNX Runtime (imported when first asked for)
    "ort_node",
    "ort_model",
    "quantization_ops",
    # the student's models
    "read_model_bytes",
    "run_model_worker",
    "load_json",
    "WorkerRun",
    "ModelInterface",
    "TensorSpec",
    "ModelPolicy",
    "qualified_op",
    "MeasuringChildren",
    "measure_jobs",
    # metrics
    "metrics",
    "probabilities",
    # the RESULTS a notebook reports
    "check_reported",
    "Expected",
    "Hint",
    "is_number",
    # what a student may be told
    "exception_name",
    "run_failure_words",
    # example submissions (imported when first asked for)
    "Mistake",
    "Variant",
    "Gamed",
    "examples_from",
    # probe helpers
    "SessionDescription",
    "timing_honesty",
    "latency_pairing",
    "table_pairing",
    "measure_pairing",
]
