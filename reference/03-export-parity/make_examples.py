"""Example submissions of assignment 03, made from the solution by small code edits.

``autograder build 03-export-parity`` calls :func:`make_examples` and writes the notebooks to
``assignments/03-export-parity/examples/``, so the examples always follow the current solution.
Each mistake is one realistic edit of one cell of the solution (each ``old`` must match exactly
once, so a changed solution makes the build fail loudly), and each mistake notebook's first cell
says what it gets wrong and which single check loses points.
``expected_examples.toml`` beside this file states every example's score per check.
"""

from __future__ import annotations

import nbformat

from autograder.lesson import Gamed, Mistake, examples_from


MISTAKES = (
    Mistake(
        "float64_export.ipynb",
        "onnx_model",
        "a float64 export",
        "The pipeline is converted with a float64 example input (`X_train[:1].astype(np.float64)`), "
        "so the model's input `X` and its probabilities are float64: it computes the right thing, "
        "but a float32 caller cannot feed it. The notebook feeds it float64 itself.",
        (
            (
                'onx = to_onnx(pipe, X_train[:1], options={"zipmap": False}, name="breast_cancer_pipeline")',
                'onx = to_onnx(pipe, X_train[:1].astype(np.float64), options={"zipmap": False}, '
                'name="breast_cancer_pipeline")',
            ),
            (
                '    return session.run(["probabilities"], {"X": X})[0]',
                '    return session.run(["probabilities"], {"X": X.astype(np.float64)})[0]',
            ),
        ),
    ),
    Mistake(
        "zipmap_left_on.ipynb",
        "onnx_model",
        "ZipMap left on",
        'The pipeline is converted without `options={"zipmap": False}`: the probabilities come out '
        "as a list of `{class: probability}` dicts named `output_probability`, which the notebook "
        "turns back into an array itself.",
        (
            (
                'onx = to_onnx(pipe, X_train[:1], options={"zipmap": False}, name="breast_cancer_pipeline")',
                'onx = to_onnx(pipe, X_train[:1], name="breast_cancer_pipeline")',
            ),
            (
                '    return session.run(["probabilities"], {"X": X})[0]',
                '    rows = session.run(["output_probability"], {"X": X})[0]\n'
                "    return np.array([[row[0], row[1]] for row in rows])",
            ),
        ),
    ),
    Mistake(
        "float_input_name.ipynb",
        "onnx_model",
        "the input named float_input",
        "The pipeline is converted as in ONNX Runtime's own tutorial, with "
        '`initial_types=[("float_input", FloatTensorType([None, 30]))]`: the model computes the '
        "right thing, but its input is named `float_input`, not `X`, so a caller that feeds `X` "
        "fails. The notebook feeds `float_input` itself.",
        (
            (
                'onx = to_onnx(pipe, X_train[:1], options={"zipmap": False}, name="breast_cancer_pipeline")',
                "from skl2onnx.common.data_types import FloatTensorType\n\n"
                'onx = to_onnx(pipe, initial_types=[("float_input", FloatTensorType([None, 30]))],\n'
                '              options={"zipmap": False}, name="breast_cancer_pipeline")',
            ),
            (
                '    return session.run(["probabilities"], {"X": X})[0]',
                '    return session.run(["probabilities"], {"float_input": X})[0]',
            ),
        ),
    ),
    Mistake(
        "fixed_batch_of_one.ipynb",
        "onnx_model",
        "a fixed batch of one row",
        'The pipeline is converted with `initial_types=[("X", FloatTensorType([1, 30]))]`: the '
        "model computes the right thing, but only one row per call, so a caller that sends the "
        "test set in one call fails. The notebook runs it row by row itself.",
        (
            (
                'onx = to_onnx(pipe, X_train[:1], options={"zipmap": False}, name="breast_cancer_pipeline")',
                "from skl2onnx.common.data_types import FloatTensorType\n\n"
                'onx = to_onnx(pipe, initial_types=[("X", FloatTensorType([1, 30]))],\n'
                '              options={"zipmap": False}, name="breast_cancer_pipeline")',
            ),
            (
                '    return session.run(["probabilities"], {"X": X})[0]',
                '    return np.concatenate([session.run(["probabilities"], {"X": X[i:i + 1]})[0] for i in range(len(X))])',
            ),
        ),
    ),
    Mistake(
        "scaler_left_out.ipynb",
        "parity",
        "the scaler left out",
        "Only the pipeline's last step, the classifier, is converted (`pipe[-1]`): the ONNX model "
        "applies coefficients learnt on scaled features to raw measurements, so its probabilities "
        "have nothing to do with the pipeline's. The notebook reports this honestly.",
        (
            (
                'onx = to_onnx(pipe, X_train[:1], options={"zipmap": False}, name="breast_cancer_pipeline")',
                'onx = to_onnx(pipe[-1], X_train[:1], options={"zipmap": False}, name="breast_cancer_pipeline")',
            ),
        ),
    ),
    Mistake(
        "binary_only_agreement.ipynb",
        "parity_report",
        "label agreement for two classes only",
        "`parity_report` compares `p[:, 1] > 0.5` instead of the argmax: the same on this data set's "
        "two classes, wrong as soon as there are three.",
        (
            (
                "    label_agreement = float(np.mean(np.argmax(a, axis=1) == np.argmax(b, axis=1)))",
                "    label_agreement = float(np.mean((a[:, 1] > 0.5) == (b[:, 1] > 0.5)))",
            ),
        ),
    ),
    Mistake(
        "float32_subtraction.ipynb",
        "parity_report",
        "the difference computed in float32",
        "`parity_report` converts both arrays to float32 before subtracting: a real difference below "
        "float32's resolution (1e-9 between two probabilities) rounds away. It reports what its "
        "own parity_report computes, so only parity_report's agreement with the reference is lost.",
        (
            (
                "    a = np.asarray(p_ref, dtype=np.float64)\n    b = np.asarray(p_onnx, dtype=np.float64)",
                "    a = np.asarray(p_ref, dtype=np.float32)\n    b = np.asarray(p_onnx, dtype=np.float32)",
            ),
        ),
    ),
    Mistake(
        "accuracy_in_percent.ipynb",
        "reported_results",
        "accuracy reported in percent",
        '`RESULTS["onnx_accuracy"]` is a percentage (95.8) instead of a share in [0, 1], so it no '
        "longer matches the grader's re-measurement.",
        (
            (
                '    "onnx_accuracy": float(np.mean(p_onnx.argmax(axis=1) == y_test)),',
                '    "onnx_accuracy": float(100 * np.mean(p_onnx.argmax(axis=1) == y_test)),',
            ),
        ),
    ),
)
MISTAKES += (
    Mistake(
        "parity_report_mean.ipynb",
        "parity_report",
        "parity_report returns the mean difference",
        "`parity_report` returns the mean |difference| instead of the largest. `RESULTS` reports what "
        "`parity_report` returns, as the contract asks, so only `parity_report` loses points.",
        (
            (
                "    max_abs_diff = float(np.max(np.abs(a - b)))",
                "    max_abs_diff = float(np.mean(np.abs(a - b)))",
            ),
        ),
    ),
)

GAMED = (
    Gamed(
        "gamed_typed_results.ipynb",
        "RESULTS typed in",
        "The notebook as shipped, with `RESULTS` typed in: perfect parity and a plausible accuracy. "
        "Nothing is fitted, exported or compared.",
        (
            (
                "p_sklearn = sklearn_probabilities(X_test)\n"
                "p_onnx = onnx_probabilities(X_test)\n"
                "RESULTS = {}  # TODO: max_abs_diff, label_agreement (from parity_report) and onnx_accuracy, on X_test",
                'RESULTS = {"max_abs_diff": 1e-07, "label_agreement": 1.0, "onnx_accuracy": 0.965}',
            ),
        ),
    ),
    Gamed(
        "gamed_echo_without_scaler.ipynb",
        "sklearn_probabilities echoes the ONNX model, the scaler left out",
        "The pipeline is fitted without its `StandardScaler` (a poor classifier), and "
        "`sklearn_probabilities` returns the ONNX model's own probabilities, so every comparison "
        "with scikit-learn agrees by construction.",
        (
            (
                "make_pipeline(StandardScaler(), SGDClassifier(",
                "make_pipeline(SGDClassifier(",
            ),
            ("    return pipe.predict_proba(X)", "    return onnx_probabilities(X)"),
        ),
        base="solution",
    ),
    Gamed(
        "gamed_noisy_echo_without_scaler.ipynb",
        "sklearn_probabilities echoes the ONNX model with noise added, the scaler left out",
        "As the echo above, with noise of float32 rounding's size added to the ONNX model's "
        "probabilities (seeded, so that every call gives the same), so that they are not equal to "
        "the model's bit for bit.",
        (
            (
                "make_pipeline(StandardScaler(), SGDClassifier(",
                "make_pipeline(SGDClassifier(",
            ),
            (
                "    return pipe.predict_proba(X)",
                "    p = onnx_probabilities(X).astype(np.float64)\n"
                "    return p + np.random.default_rng(0).normal(0.0, 1e-7, p.shape)",
            ),
        ),
        base="solution",
    ),
    Gamed(
        "gamed_echo.ipynb",
        "sklearn_probabilities echoes the ONNX model of the lesson's pipeline",
        "The pipeline and its export are the lesson's, but `sklearn_probabilities` returns the ONNX "
        "model's own probabilities: `RESULTS`' parity numbers compare the export with itself.",
        (("    return pipe.predict_proba(X)", "    return onnx_probabilities(X)"),),
        base="solution",
    ),
    Gamed(
        "gamed_constant_results.ipynb",
        "RESULTS typed into the finished solution",
        "The solution, with `RESULTS` typed in as round numbers instead of measured: perfect parity "
        "and a plausible accuracy.",
        (
            (
                "max_abs_diff, label_agreement = parity_report(p_sklearn, p_onnx)\n"
                "RESULTS = {\n"
                '    "max_abs_diff": max_abs_diff,\n'
                '    "label_agreement": label_agreement,\n'
                '    "onnx_accuracy": float(np.mean(p_onnx.argmax(axis=1) == y_test)),\n'
                "}",
                'RESULTS = {"max_abs_diff": 1e-07, "label_agreement": 1.0, "onnx_accuracy": 0.965}',
            ),
        ),
        base="solution",
    ),
)


def make_examples(solution: nbformat.NotebookNode, student: nbformat.NotebookNode) -> dict[str, nbformat.NotebookNode]:
    return examples_from(solution, student, MISTAKES + GAMED)
