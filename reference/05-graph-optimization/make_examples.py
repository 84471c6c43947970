"""Example submissions of assignment 05, made from the solution by small code edits.

``autograder build 05-graph-optimization`` calls :func:`make_examples` and writes the notebooks to
``assignments/05-graph-optimization/examples/``, so the examples always follow the current
solution. Each mistake is one realistic edit of one cell of the solution (each ``old`` must match
exactly once, so a changed solution makes the build fail loudly), and each mistake notebook's first
cell says what it gets wrong and which single check loses points.
``reference/05-graph-optimization/expected_examples.toml`` states every example's score per check.
"""

from __future__ import annotations

import nbformat

from autograder.lesson import Gamed, Mistake, examples_from


MISTAKES = (
    Mistake(
        "count_ops_ignores_domains.ipynb",
        "count_ops",
        "count_ops ignores domains",
        "`count_ops` counts `node.op_type` alone, as most snippets online do: ONNX Runtime's "
        "`com.microsoft.Gelu` is counted as `Gelu`, and an `ai.onnx.ml.Scaler` as `Scaler`. The "
        "totals stay right, so the node counts the notebook reports are still the grader's.",
        (
            (
                '        default = node.domain in ("", "ai.onnx")\n'
                '        counts[node.op_type if default else f"{node.domain}.{node.op_type}"] += 1',
                "        counts[node.op_type] += 1",
            ),
        ),
    ),
    Mistake(
        "saved_at_basic.ipynb",
        "optimized_model",
        "the model to deploy saved at ORT_ENABLE_BASIC",
        "The model to deploy is saved from a session at `ORT_ENABLE_BASIC`, the level that keeps to "
        "standard ONNX operators: fewer nodes (Gemm, LayerNormalization), the same outputs, but no "
        "contrib operator, so each GELU still runs as five nodes.",
        (
            (
                'deployed = optimized_session("ORT_ENABLE_EXTENDED", "artifacts/mlp_optimized.onnx")',
                'deployed = optimized_session("ORT_ENABLE_BASIC", "artifacts/mlp_optimized.onnx")',
            ),
        ),
    ),
    Mistake(
        "node_counts_of_model_as_written.ipynb",
        "reported_node_counts",
        "node counts of the model as written",
        '`RESULTS["node_counts"]` counts `MODEL_PATH`, the model the sessions loaded, at every level '
        "instead of the graph each session saved: 26 nodes four times.",
        (
            (
                '    "node_counts": {level: sum(count_ops(f"artifacts/mlp_{level}.onnx").values()) for level in LEVELS},',
                '    "node_counts": {level: sum(count_ops(MODEL_PATH).values()) for level in LEVELS},',
            ),
        ),
    ),
    Mistake(
        "latency_in_seconds.ipynb",
        "reported_latency",
        "latencies in seconds",
        "`latency_ms` returns the median of `time.perf_counter()` differences as they are, in "
        "seconds: every latency is reported a thousand times too small.",
        (("    return float(np.median(times) * 1000)", "    return float(np.median(times))"),),
    ),
)

README_RESULTS = (
    'RESULTS = {"node_counts": {"ORT_DISABLE_ALL": 26, "ORT_ENABLE_BASIC": 15, "ORT_ENABLE_EXTENDED": 7,'
    ' "ORT_ENABLE_ALL": 7},\n'
    '           "latency_ms": {"ORT_DISABLE_ALL": 0.08, "ORT_ENABLE_BASIC": 0.06, "ORT_ENABLE_EXTENDED": 0.05,'
    ' "ORT_ENABLE_ALL": 0.05}}'
)
GAMED = (
    Gamed(
        "gamed_readme_constants.ipynb",
        "the README's node counts and guessed latencies",
        "The notebook as shipped, with `RESULTS` typed in: the README's node counts and latencies of "
        "the right order. No session is opened, nothing is saved, counted or timed.",
        (
            (
                'RESULTS = {}  # TODO: {"node_counts": {level: int}, "latency_ms": {level: float}} for every level of LEVELS',
                README_RESULTS,
            ),
        ),
    ),
    Gamed(
        "gamed_only_the_deployed_model.ipynb",
        "the model to deploy saved, the numbers typed in",
        "The solution's `count_ops` and the model to deploy, but no session per level: nothing is "
        "saved, counted or timed per level, and `RESULTS` holds the README's node counts and guessed "
        "latencies.",
        (
            (
                'sessions = {level: optimized_session(level, f"artifacts/mlp_{level}.onnx") for level in LEVELS}',
                "sessions = {}",
            ),
            (
                '    "node_counts": {level: sum(count_ops(f"artifacts/mlp_{level}.onnx").values()) for level in LEVELS},\n'
                '    "latency_ms": {level: latency_ms(sessions[level], X_timing) for level in LEVELS},\n'
                "}",
                '    "node_counts": {"ORT_DISABLE_ALL": 26, "ORT_ENABLE_BASIC": 15, "ORT_ENABLE_EXTENDED": 7,'
                ' "ORT_ENABLE_ALL": 7},\n'
                '    "latency_ms": {"ORT_DISABLE_ALL": 0.08, "ORT_ENABLE_BASIC": 0.06, "ORT_ENABLE_EXTENDED": 0.05,'
                ' "ORT_ENABLE_ALL": 0.05},\n'
                "}",
            ),
        ),
        base="solution",
    ),
    Gamed(
        "gamed_typed_latencies.ipynb",
        "the latencies typed in, no timing function",
        "The solution's sessions, saved graphs and node counts, but `latency_ms` is left unwritten and "
        "`RESULTS` holds latencies typed in (the right order for this model on this machine): "
        "nothing of the notebook timed them.",
        (
            (
                '    """Median milliseconds of one session.run on x, over `runs` timed runs after `warmup` runs."""\n'
                "    for _ in range(warmup):",
                '    """Median milliseconds of one session.run on x, over `runs` timed runs after `warmup` runs."""\n'
                '    raise NotImplementedError("latency_ms")\n'
                "    for _ in range(warmup):",
            ),
            (
                '    "latency_ms": {level: latency_ms(sessions[level], X_timing) for level in LEVELS},\n',
                '    "latency_ms": {"ORT_DISABLE_ALL": 0.08, "ORT_ENABLE_BASIC": 0.06, "ORT_ENABLE_EXTENDED": 0.05,'
                ' "ORT_ENABLE_ALL": 0.05},\n',
            ),
        ),
        base="solution",
    ),
)


def make_examples(solution: nbformat.NotebookNode, student: nbformat.NotebookNode) -> dict[str, nbformat.NotebookNode]:
    return examples_from(solution, student, MISTAKES + GAMED)
