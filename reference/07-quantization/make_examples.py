"""Example submissions of assignment 07, made from the solution by small code edits.

``autograder build 07-quantization`` calls :func:`make_examples` and writes the notebooks to
``assignments/07-quantization/examples/``, so the examples always follow the current solution.
Each mistake is one realistic edit of the solution's code (the edit must match exactly once, so a
changed solution makes the build fail loudly instead of producing a silently correct "mistake"),
and each mistake notebook's first cell says what it gets wrong and which single check must lose
points. ``VARIANTS`` are valid solutions written another way (full marks, every self-check passes).
``expected_examples.toml`` beside this file states the same for the conformance suite.

Run directly, it rebuilds the assignment: ``python reference/07-quantization/make_examples.py``.
"""

from __future__ import annotations

import nbformat

from autograder.lesson import Gamed, Mistake, Variant, examples_from


MISTAKES = (
    Mistake(
        "quantize_no_saturation.ipynb",
        "quantize",
        "quantize without saturation",
        "`quantize` rounds half to even but never clips: values outside the range of the integer "
        "type wrap around (or become garbage) in the final cast instead of saturating at "
        "-128/127 or 0/255.",
        (
            (
                "    r = np.rint(np.asarray(x, dtype=np.float32) / np.float32(scale))  # float32 division, ties to even\n"
                "    r = np.clip(r, -2.0**24, 2.0**24)       # far outside any int8 range; keeps the int32 cast defined\n"
                "    q = r.astype(np.int32) + np.int32(zero_point)                       # add the zero point in int32\n"
                "    return np.asarray(np.clip(q, qmin, qmax).astype(dtype))             # saturate, then cast last",
                "    q = np.round(np.asarray(x, dtype=np.float32) / scale) + zero_point\n"
                "    return np.asarray(q).astype(dtype)",
            ),
        ),
    ),
    Mistake(
        "quantize_loop_uint8_zero_point.ipynb",
        "quantize",
        "quantize adds the zero point in a loop, in its own type",
        "`quantize` adds the zero point value by value in plain Python, `int(v) + zero_point`, then "
        "clips. That is right for a Python int zero point, but a NumPy `np.uint8` or `np.int8` zero "
        "point keeps its type under NumPy 2: `np.uint8(128) + 500` raises `OverflowError: Python "
        "integer 500 out of bounds for uint8` and `np.uint8(128) + 150` wraps around to 22, before "
        "the clip can saturate anything.",
        (
            (
                "    q = r.astype(np.int32) + np.int32(zero_point)                       # add the zero point in int32",
                "    q = np.array([int(v) + zero_point for v in r.reshape(-1)]).reshape(r.shape)  # one value at a time",
            ),
        ),
    ),
    Mistake(
        "quantize_shadowed_by_import.ipynb",
        "quantize",
        "quantize replaced by an import",
        "The dynamic-quantization cell imports `quantize` from `onnxruntime.quantization` along with "
        "`quantize_dynamic`. That name is ONNX Runtime's model quantizer, `quantize(model_input, "
        "model_output, quant_config)`: it silently replaces the `quantize` of part 2, so every call "
        "the grader makes afterwards reaches ONNX Runtime's function and fails.",
        (
            (
                'quantize_dynamic("artifacts/fp32.onnx", "artifacts/int8_dynamic.onnx", weight_type=QuantType.QInt8)',
                "from onnxruntime.quantization import QuantType, quantize, quantize_dynamic\n"
                'quantize_dynamic("artifacts/fp32.onnx", "artifacts/int8_dynamic.onnx", weight_type=QuantType.QInt8)',
            ),
        ),
    ),
    Mistake(
        "quantize_rounds_half_away_from_zero.ipynb",
        "quantize",
        "quantize rounds ties away from zero",
        "`quantize` rounds with `np.sign(v) * np.floor(np.abs(v) + 0.5)`, the rounding taught at "
        "school: 2.5 becomes 3 and -2.5 becomes -3, where `QuantizeLinear` rounds half to even (2 and "
        "-2). Only a quotient that is exactly k + 0.5 is affected.",
        (
            (
                "    r = np.rint(np.asarray(x, dtype=np.float32) / np.float32(scale))  # float32 division, ties to even",
                "    v = np.asarray(x, dtype=np.float32) / np.float32(scale)\n"
                "    r = np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))              # ties away from zero",
            ),
        ),
    ),
    Mistake(
        "dequantize_no_zero_point.ipynb",
        "dequantize",
        "dequantize forgets the zero point",
        "`dequantize` returns `q * scale`: correct only when the zero point is 0, off by "
        "`zero_point * scale` otherwise (every uint8 tensor with zero point 128, for example).",
        (
            (
                "    diff = np.asarray(q).astype(np.int32) - np.int32(zero_point)         # no uint8 wraparound",
                "    diff = np.asarray(q).astype(np.int32)",
            ),
        ),
    ),
    Mistake(
        "choose_qparams_no_zero_in_range.ipynb",
        "choose_qparams",
        "choose_qparams keeps a range without 0",
        "`choose_qparams` uses `[rmin, rmax]` as given instead of widening it to include 0, so for "
        "an all-positive or all-negative range the scale is too small and the zero point falls "
        "outside the integer range (0.0 is no longer representable).",
        (
            (
                "    rmin = min(np.float32(rmin), np.float32(0.0))                       # widen to include 0\n"
                "    rmax = max(np.float32(rmax), np.float32(0.0))",
                "    rmin, rmax = np.float32(rmin), np.float32(rmax)",
            ),
        ),
    ),
    Mistake(
        "dynamic_uint8_weights.ipynb",
        "dynamic_model",
        "dynamic model with uint8 weights",
        "`quantize_dynamic` is called with `weight_type=QuantType.QUInt8`: the model is dynamically "
        "quantized and works, but its weights are uint8, not the int8 the contract asks for.",
        (
            (
                'quantize_dynamic("artifacts/fp32.onnx", "artifacts/int8_dynamic.onnx", weight_type=QuantType.QInt8)',
                'quantize_dynamic("artifacts/fp32.onnx", "artifacts/int8_dynamic.onnx", weight_type=QuantType.QUInt8)',
            ),
        ),
    ),
    Mistake(
        "dynamic_from_other_model.ipynb",
        "dynamic_model",
        "dynamic model of a different network",
        "The dynamic-quantization cell trains a second MLP (another seed) and quantizes that one, so "
        "`artifacts/int8_dynamic.onnx` is not derived from `artifacts/fp32.onnx`: its weights are "
        "far from the fp32 ones and its outputs drift accordingly.",
        (
            (
                'quantize_dynamic("artifacts/fp32.onnx", "artifacts/int8_dynamic.onnx", weight_type=QuantType.QInt8)',
                "other = MLPClassifier(hidden_layer_sizes=(256, 256), random_state=MODEL_SEED + 1, max_iter=300)\n"
                "other.fit(X_train, y_train)\n"
                'with open("other_fp32.onnx", "wb") as f:\n'
                '    f.write(to_onnx(other, X_train[:1], options={"zipmap": False}, name="mlp_moons").SerializeToString())\n'
                'quantize_dynamic("other_fp32.onnx", "artifacts/int8_dynamic.onnx", weight_type=QuantType.QInt8)',
            ),
        ),
    ),
    Mistake(
        "static_per_tensor.ipynb",
        "static_model",
        "static model with per-tensor weights",
        "`quantize_static` is called with `per_channel=False`: one scale per weight matrix instead "
        "of one per output column.",
        (("quant_format=QuantFormat.QDQ, per_channel=True,", "quant_format=QuantFormat.QDQ, per_channel=False,"),),
    ),
    Mistake(
        "static_8_calibration_rows.ipynb",
        "static_model",
        "static model calibrated on 8 rows",
        "The static model is calibrated on 8 training rows instead of 300: the calibrated ranges do "
        "not cover the data, so test inputs are clipped and the outputs drift.",
        (("choice(len(X_train), 300, replace=False)", "choice(len(X_train), 8, replace=False)"),),
    ),
    Mistake(
        "small_model_32x32.ipynb",
        "size",
        "a (32, 32) model",
        "The MLP has `hidden_layer_sizes=(32, 32)` (1,185 parameters). Everything is correct, but "
        "at this size the graph's own nodes and scales outweigh the weights, so the int8 models are "
        "far more than a quarter of the fp32 one (the grader compares the models re-serialised "
        "without names and padding: 0.47 and 0.68 of fp32).",
        (
            (
                "MLPClassifier(hidden_layer_sizes=(256, 256), random_state=MODEL_SEED, max_iter=300)",
                "MLPClassifier(hidden_layer_sizes=(32, 32), random_state=MODEL_SEED, max_iter=300)",
            ),
        ),
    ),
    Mistake(
        "static_calibrated_on_test.ipynb",
        "static_model",
        "static model calibrated on X_test",
        "The calibration rows are drawn from `X_test` instead of `X_train`. The model works and "
        "scores well, but calibration is part of training: its input range is now set by test rows "
        "(the grader reads which rows set it back from the input QuantizeLinear's scale and zero "
        "point), so the test set leaked into the model.",
        (
            (
                "calibration_rows = X_train[np.random.default_rng(CALIBRATION_SEED).choice(len(X_train), 300, replace=False)]",
                "calibration_rows = X_test[np.random.default_rng(CALIBRATION_SEED).choice(len(X_test), 300, replace=False)]",
            ),
        ),
    ),
    Mistake(
        "results_elementwise_drift.ipynb",
        "reported_results",
        "element-wise relative drift",
        "`max_rel_drift` divides element by element, `max(|p - r| / |r|)`, instead of per row "
        "(`max_i max_j |p - r| / max_j |r|`): near-zero fp32 probabilities blow the reported drifts "
        "up, so `RESULTS` no longer matches the grader's re-measurement.",
        (
            (
                "    return float(np.max(np.max(np.abs(p - r), axis=1) / np.max(np.abs(r), axis=1)))",
                "    return float(np.max(np.abs(p - r) / np.abs(r)))",
            ),
        ),
    ),
    Mistake(
        "memory_error_after_functions.ipynb",
        "execution",
        "an allocation larger than the kernel's memory",
        "After training, the notebook allocates a dense grid of the plane for a later plot, "
        "`np.ones(1_000_000_000)`: 8 GB, twice what the grader's kernel may use. The allocation "
        "raises `MemoryError` in that cell, as Python does, and nothing else is lost: the kernel "
        "lives on, every later cell runs, and the functions defined before it are graded in full.",
        (
            (
                'print("sklearn test accuracy:", clf.score(X_test, y_test))',
                'print("sklearn test accuracy:", clf.score(X_test, y_test))\n'
                "grid = np.ones(1_000_000_000)   # a dense grid of the plane, for a plot later",
            ),
        ),
    ),
    Mistake(
        "error_in_last_cell.ipynb",
        "execution",
        "an error in the last cell",
        "Everything is correct, but the extra line added to the last (summary) cell uses a key that "
        "`RESULTS` does not have and raises `KeyError`, so the notebook does not run cleanly to the end.",
        (
            (
                "          f\"{r['max_rel_drift']:>7.3f} {r['edge_max_rel_drift']:>11.3f}\")",
                "          f\"{r['max_rel_drift']:>7.3f} {r['edge_max_rel_drift']:>11.3f}\")\n"
                "print(f\"int8_qdq speed-up: {RESULTS['fp32']['latency'] / RESULTS['int8_qdq']['latency']:.2f}x\")",
            ),
        ),
    ),
)


VARIANTS = (
    Variant(
        "quantize_returns_numpy_scalar.ipynb",
        "quantize returns a NumPy scalar for a scalar",
        "For a scalar `x`, `quantize` returns an `np.int8` (or `np.uint8`) scalar instead of a 0-d "
        "array: the same value, dtype and shape once read with `np.asarray`, which is how the "
        "grader and the self-checks read a result.",
        (
            (
                "    return np.asarray(np.clip(q, qmin, qmax).astype(dtype))             # saturate, then cast last",
                "    q = np.clip(q, qmin, qmax).astype(dtype)                            # saturate, then cast last\n"
                "    return q[()] if q.ndim == 0 else q                                  # a NumPy scalar for a scalar",
            ),
        ),
    ),
    Variant(
        "memory_error_caught.ipynb",
        "an oversized allocation, caught",
        "After training, the notebook tries to allocate a dense grid of the plane, "
        "`np.ones(1_000_000_000)` (8 GB, twice what the grader's kernel may use), inside "
        "`try/except MemoryError`, and goes on without it: the allocation fails in the cell as it "
        "would in Python, and the notebook is correct.",
        (
            (
                'print("sklearn test accuracy:", clf.score(X_test, y_test))',
                'print("sklearn test accuracy:", clf.score(X_test, y_test))\n'
                "try:\n"
                "    grid = np.ones(1_000_000_000)   # a dense grid of the plane, for a plot later\n"
                "except MemoryError:\n"
                "    grid = None                     # too large: plot on a coarser grid",
            ),
        ),
    ),
)

TYPED_RESULTS = 'RESULTS = {\n    "fp32": {"size_bytes": 290000, "accuracy": 0.97, "latency_ms": 0.5, "max_rel_drift": 0.0, "edge_max_rel_drift": 0.0},\n    "int8_dynamic": {"size_bytes": 78000, "accuracy": 0.97, "latency_ms": 0.6, "max_rel_drift": 0.01, "edge_max_rel_drift": 0.02},\n    "int8_qdq": {"size_bytes": 83000, "accuracy": 0.96, "latency_ms": 0.7, "max_rel_drift": 0.02, "edge_max_rel_drift": 0.5},\n}\nRESULTS'
SOLUTION_RESULTS = "\n".join(
    [
        "RESULTS = {}",
        "for v in VARIANTS:",
        "    p_test = probabilities(sessions[v], X_test)",
        "    p_edge = probabilities(sessions[v], X_edge)",
        "    RESULTS[v] = {",
        '        "size_bytes": int(os.path.getsize(f"artifacts/{v}.onnx")),',
        '        "accuracy": float(np.mean(p_test.argmax(axis=1) == y_test)),',
        '        "latency_ms": median_latency_ms(sessions[v], X_test),',
        '        "max_rel_drift": max_rel_drift(p_test, ref_test),',
        '        "edge_max_rel_drift": max_rel_drift(p_edge, ref_edge),',
        "    }",
        "RESULTS",
    ]
)
GAMED = (
    Gamed(
        "gamed_typed_results_after_the_work.ipynb",
        "RESULTS typed in after the work",
        "The solution's models, with `RESULTS` typed in instead of measured: round numbers of the "
        "right order. The models are real work; the numbers are not.",
        (
            (
                SOLUTION_RESULTS,
                TYPED_RESULTS,
            ),
        ),
        base="solution",
    ),
    Gamed(
        "gamed_typed_results.ipynb",
        "RESULTS typed in",
        "The notebook as shipped, with `RESULTS` typed in: sizes, accuracies, latencies and drifts "
        "of the right order. No model is trained, quantized or timed.",
        (
            (
                "RESULTS = {}\nfor v in VARIANTS:\n    RESULTS[v] = ...  # TODO: the dict of five numbers described above\nRESULTS",
                TYPED_RESULTS,
            ),
        ),
    ),
)


def make_examples(solution: nbformat.NotebookNode, student: nbformat.NotebookNode) -> dict[str, nbformat.NotebookNode]:
    return examples_from(solution, student, MISTAKES + VARIANTS + GAMED)
