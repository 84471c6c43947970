"""Example submissions of assignment 06, made from the solution by small code edits.

``autograder build 06-performance`` calls :func:`make_examples` and writes the notebooks to
``assignments/06-performance/examples/``, so the examples always follow the current solution.
Each mistake is one realistic edit of one cell of the solution (each ``old`` must match exactly
once, so a changed solution makes the build fail loudly), and each mistake notebook's first cell
says what it gets wrong and which single check loses points. The gamed examples seek points
without the work; ``reference/06-performance/expected_examples.toml`` states every example's
score per check, and a gamed example's maximum.
"""

from __future__ import annotations

import nbformat

from autograder.lesson import Gamed, Mistake, examples_from

TIMED = (
    "                start = time.perf_counter()\n"
    "                session.run(None, feed)\n"
    "                times.append(time.perf_counter() - start)\n"
    "            table[(batch_size, n_threads)] = float(np.median(times) * 1000)"
)

MISTAKES = (
    Mistake(
        "top_ops_counts_fences.ipynb",
        "top_ops",
        "top_ops counts the fence events",
        "`top_ops` adds the `dur` of every `Node` event: right on a profile of today's ONNX Runtime, "
        "which writes only kernel events, but a profile of an older one also holds the "
        "`_fence_before` and `_fence_after` events around each kernel, whose waiting is then counted "
        "as the operator's time.",
        (
            (
                '        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):',
                '        if event.get("cat") == "Node":',
            ),
        ),
    ),
    Mistake(
        "top_ops_by_node_name.ipynb",
        "top_ops",
        "top_ops totals per node, not per operator",
        "`top_ops` adds the kernel time per event name, the node (`fused dense2.matmul/...`), "
        "instead of per `args['op_name']`: the three `FusedGemm` layers come out as three rows, "
        "and no row names an operator. `RESULTS` repeats what it returns, honestly.",
        (
            (
                '            totals[event["args"]["op_name"]] += event["dur"]',
                '            totals[event["name"].removesuffix("_kernel_time")] += event["dur"]',
            ),
        ),
    ),
    Mistake(
        "top_ops_ties_unsorted.ipynb",
        "top_ops",
        "top_ops leaves ties in the order first seen",
        "`top_ops` sorts by the total alone (`reverse=True`): Python's sort is stable, so two "
        "operators with the same total keep the order in which the profile first named them, "
        "instead of the alphabetical one.",
        (
            (
                "    return sorted(totals.items(), key=lambda item: (-item[1], item[0]))[:k]",
                "    return sorted(totals.items(), key=lambda item: item[1], reverse=True)[:k]",
            ),
        ),
    ),
    Mistake(
        "make_session_ignores_threads.ipynb",
        "make_session",
        "make_session sets the wrong pool",
        "`make_session` puts the thread count into `inter_op_num_threads`, the pool that runs "
        "independent nodes side by side (only in parallel execution mode), and leaves "
        "`intra_op_num_threads` at 0: ONNX Runtime then sizes the operators' pool by the machine.",
        (
            (
                "    options.intra_op_num_threads = intra_op_threads",
                "    options.inter_op_num_threads = intra_op_threads",
            ),
        ),
    ),
    Mistake(
        "profile_of_one_row.ipynb",
        "profile",
        "the profile of one row",
        "The profiled session runs `X_timing[:1]`, a single row, instead of the timing batch: a "
        "real profile of the model, but not of the runs the contract asks for.",
        (('    profiled.run(None, {"x": X_timing})', '    profiled.run(None, {"x": X_timing[:1]})'),),
    ),
    Mistake(
        "latency_in_seconds.ipynb",
        "latency_table",
        "latencies in seconds",
        "`latency_table` keeps the median of `time.perf_counter()` differences as they are, in "
        "seconds: every latency is reported a thousand times too small.",
        (
            (
                "            table[(batch_size, n_threads)] = float(np.median(times) * 1000)",
                "            table[(batch_size, n_threads)] = float(np.median(times))",
            ),
        ),
    ),
    Mistake(
        "latency_sum_of_runs.ipynb",
        "latency_table",
        "the sum of the runs",
        "`latency_table` times the 50 runs together and reports their total: the latency of fifty runs, not of one.",
        (
            (
                TIMED,
                "                session.run(None, feed)\n"
                "            table[(batch_size, n_threads)] = float((time.perf_counter() - start) * 1000)",
            ),
            (
                "            times = []\n            for _ in range(runs):\n",
                "            start = time.perf_counter()\n            for _ in range(runs):\n",
            ),
        ),
    ),
    Mistake(
        "latency_whole_batch.ipynb",
        "latency_table",
        "every batch size timed on the whole batch",
        "`latency_table` feeds `X_timing`, all 256 rows, whatever the batch size: every entry is the "
        "latency of the largest batch, so the batch of one is reported about 40 times too slow.",
        (('            feed = {"x": X_timing[:batch_size]}', '            feed = {"x": X_timing}'),),
    ),
    Mistake(
        "latency_keys_as_tuples.ipynb",
        "reported_latency",
        "the table's keys written as Python tuples",
        "`RESULTS['latency_ms']` is keyed by `str((b, t))`, `'(1, 1)'`, instead of the contract's "
        "`'1,1'`: the grader finds none of the table's entries, nor the ones the comparisons come from.",
        (
            (
                '    "latency_ms": {f"{b},{t}": ms for (b, t), ms in table.items()},',
                '    "latency_ms": {str(key): ms for key, ms in table.items()},',
            ),
        ),
    ),
)

README_RESULTS = (
    'RESULTS = {"latency_ms": {"1,1": 0.03, "1,2": 0.03, "32,1": 0.15, "32,2": 0.1, "256,1": 1.1, "256,2": 0.65},\n'
    '           "batch_speedup": 9.0, "thread_speedup": 1.7,\n'
    '           "top_ops": [["FusedGemm", 4100], ["Gemm", 75], ["Softmax", 30]]}\n'
    "RESULTS"
)
STARTER_RESULTS = (
    'RESULTS = {}  # TODO: {"latency_ms": {"b,t": ms}, "batch_speedup": float, "thread_speedup": float,'
    ' "top_ops": [[op, us], ...]}\nRESULTS'
)
GAMED = (
    Gamed(
        "gamed_readme_constants.ipynb",
        "the README's numbers typed into RESULTS",
        "The notebook as shipped, with `RESULTS` typed in: latencies of the right order and the "
        "README's top operators. No session is opened, nothing is timed, profiled or read.",
        ((STARTER_RESULTS, README_RESULTS),),
    ),
    Gamed(
        "gamed_only_printing_cells.ipynb",
        "only the cells that print",
        "The notebook as shipped, with the table and `RESULTS` typed in so that every printing cell "
        "runs and prints a plausible report: nothing is measured, profiled or read.",
        (
            (
                "table = latency_table(MODEL_PATH, BATCH_SIZES, THREADS)\ntable",
                "table = {(1, 1): 0.03, (1, 2): 0.03, (32, 1): 0.15, (32, 2): 0.1, (256, 1): 1.1, (256, 2): 0.65}\ntable",
            ),
            (STARTER_RESULTS, README_RESULTS),
        ),
    ),
    Gamed(
        "gamed_ideal_speedups.ipynb",
        "the comparisons the lesson expects, not the measured ones",
        "The solution, but the comparisons are typed in as the ideal ones: the thread speedup as the "
        "thread count itself (2 threads, twice as fast) and the batch speedup as the batch size, "
        "whatever the table measured.",
        (
            (
                '    "batch_speedup": 256 * table[(1, 1)] / table[(256, 1)],\n'
                '    "thread_speedup": table[(256, 1)] / table[(256, 2)],',
                '    "batch_speedup": 256.0,\n    "thread_speedup": float(THREADS[-1]),',
            ),
        ),
        base="solution",
    ),
    Gamed(
        "gamed_typed_top_ops.ipynb",
        "the README's top operators typed into RESULTS",
        "The solution, with a genuine profile and a working `top_ops`, but `RESULTS['top_ops']` "
        "typed in from the README instead of read from the profile: the operators are right, the "
        "microseconds are not the ones this profile holds.",
        (
            (
                '    "top_ops": [[op, us] for op, us in top_ops(PROFILE_PATH, TOP_K)],',
                '    "top_ops": [["FusedGemm", 4100], ["Gemm", 75], ["Softmax", 30]],',
            ),
        ),
        base="solution",
    ),
)


def make_examples(solution: nbformat.NotebookNode, student: nbformat.NotebookNode) -> dict[str, nbformat.NotebookNode]:
    return examples_from(solution, student, MISTAKES + GAMED)
