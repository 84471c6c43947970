"""ONNX Runtime profiles: the hidden ones ``top_ops`` is probed on, and the reference's reading.

A profile is what ``SessionOptions.enable_profiling`` makes ONNX Runtime write: a JSON list of
Chrome-trace events (``"ph": "X"``, ``ts`` and ``dur`` in microseconds, ``pid``, ``tid``).
``"cat": "Session"`` events time the session (``model_loading_uri``, ``session_initialization``,
then per run ``SequentialExecutor::Execute`` and ``model_run``); ``"cat": "Node"`` events time
each node of each run, named ``"<node name>_kernel_time"`` with ``args.op_name`` (the operator
ONNX Runtime ran, after its fusions: ``FusedGemm``), ``args.provider`` and, for a session with
more than one intra-op thread, ``args.thread_scheduling_stats`` (the pool's ``sub_threads``).
ONNX Runtime before 1.11 also wrote ``"<node name>_fence_before"`` and ``"_fence_after"`` Node
events around each kernel, with ``args.op_name`` too: they time waiting, not computing.

:func:`reference_top_ops` is the contract's ``top_ops``: the total ``dur`` of the kernel events
only, per ``op_name``, largest first, ties by name.

The hidden profiles (:func:`probe_cases`) are drawn per submission from the deployment's secret
(stream :data:`PROBE_STREAM`): a graph of 6 to 24 nodes of realistic operators (several nodes of
the same operator, fused and unfused names), run 1 to 4 times, each event as ONNX Runtime 1.x
writes it. Groups, each its own rubric part: ``current`` (the format of ONNX Runtime 1.11 and
later, as the notebook's own profile), ``fences`` (the older format, whose fence events carry a
few microseconds each), ``ties`` (two operators with the same total at the top and at the k-th
place: the order must come from the name). Every file is at most a few tens of kilobytes.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import numpy as np

from autograder.lesson import Arg, Expect, ProbeCase, Tolerance, hidden_secret

FUNCTION = "top_ops"
PROBE_STREAM = "06-performance/top-ops-profiles"
KERNEL, FENCES = "_kernel_time", ("_fence_before", "_fence_after")
# operator → (name prefix, typical microseconds per call at the profile's batch)
OPERATORS: dict[str, tuple[str, float]] = {
    "FusedGemm": ("fused dense{}.matmul/MatMulAddFusion", 240.0),
    "Gemm": ("dense{}.matmul/MatMulAddFusion", 60.0),
    "MatMul": ("matmul_{}", 180.0),
    "Add": ("add_{}", 12.0),
    "Relu": ("relu_{}", 8.0),
    "Conv": ("conv_{}", 400.0),
    "FusedConv": ("fused conv_{}/ConvActivationFusion", 380.0),
    "LayerNormalization": ("layernorm_{}", 30.0),
    "Gelu": ("fused gelu_{}/GeluFusion", 25.0),
    "Softmax": ("softmax_{}", 10.0),
    "Transpose": ("transpose_{}", 15.0),
    "Reshape": ("reshape_{}", 2.0),
    "Attention": ("fused attention_{}/AttentionFusion", 900.0),
    "MaxPool": ("maxpool_{}", 40.0),
}
# group → (number of cases, fence events?, tie?)
GROUPS: dict[str, tuple[int, bool, bool]] = {
    "current": (2, False, False),
    "fences": (2, True, False),
    "ties": (2, False, True),
}
K_RANGE = (2, 4)
EXACT = Tolerance(rtol=0.0, atol=0.0)  # microseconds are integers: a total is exact (an int or a float)


def reference_top_ops(events: Any, k: int) -> list[tuple[str, int]]:
    """The contract's ``top_ops`` on a parsed profile: ``[(op_type, total_us)]`` of the ``k``
    operators with the largest total kernel time, largest first, ties by name."""
    totals: dict[str, int] = defaultdict(int)
    for e in events if isinstance(events, list) else []:
        if not isinstance(e, dict) or e.get("cat") != "Node" or not str(e.get("name", "")).endswith(KERNEL):
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        op, dur = args.get("op_name"), e.get("dur")
        if isinstance(op, str) and isinstance(dur, int) and not isinstance(dur, bool):
            totals[op] += dur
    return sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def _graph(rng: np.random.Generator, tie: bool) -> list[tuple[str, str, int]]:
    """Nodes ``(name, op_type, microseconds per call)``: 4 to 7 operators, 1 to 5 nodes each, in
    a random order; with ``tie`` each operator first appears in reverse order of its name, so an
    order of ties that comes from anything but the name (the first seen, ``Counter.most_common``,
    a stable sort by total alone) is wrong on every tied pair."""
    ops = [str(o) for o in rng.choice(sorted(OPERATORS), size=int(rng.integers(4, 8)), replace=False)]
    nodes = []
    for op in ops:
        prefix, typical = OPERATORS[op]
        for _ in range(int(rng.integers(1, 6))):
            nodes.append((prefix.format(len(nodes) + 1), op, max(1, int(rng.lognormal(np.log(typical), 0.6)))))
    nodes = [nodes[i] for i in rng.permutation(len(nodes))]
    return sorted(nodes, key=lambda n: n[1], reverse=True) if tie else nodes


def _durations(rng: np.random.Generator, nodes: list[tuple[str, str, int]], runs: int, tie: bool) -> np.ndarray:
    """Microseconds of each node's kernel in each run (``[run, node]``): the first run is slower
    (memory planning, weight packing), as ONNX Runtime's is. With ``tie``, the two largest totals
    are made equal, and the third and fourth too: only the names can order them."""
    us = np.array([n[2] for n in nodes], dtype=np.int64)
    durs = np.stack([us * (rng.integers(3, 12, len(nodes)) if run == 0 else 1) for run in range(runs)])
    if tie:
        ops = [n[1] for n in nodes]
        totals = {op: int(durs[:, [i for i, o in enumerate(ops) if o == op]].sum()) for op in set(ops)}
        ranked = sorted(totals, key=lambda o: (-totals[o], o))
        for keep, match in ((ranked[0], ranked[1]), (ranked[2], ranked[3])):
            durs[-1, ops.index(match)] += totals[keep] - totals[match]  # on one call of the smaller
    return durs


def _shape_args(rng: np.random.Generator, batch: int, op: str) -> dict[str, Any]:
    width = int(rng.choice([64, 128, 256, 512, 768]))
    return {
        "input_type_shape": [{"float": [batch, width]}] + ([{"float": [width]}] if "Gemm" in op else []),
        "output_type_shape": [{"float": [batch, width]}],
        "activation_size": str(4 * batch * width),
        "output_size": str(4 * batch * width),
        "parameter_size": str(4 * width if "Gemm" in op or op == "MatMul" else 0),
    }


def hidden_profile(rng: np.random.Generator, fences: bool, tie: bool) -> bytes:
    """One profile as ONNX Runtime writes it (see the module): session events, then per run the
    kernel events of every node (with fence events around each in the older format)."""
    nodes = _graph(rng, tie)
    pid = int(rng.integers(1000, 60000))
    threads = int(rng.integers(1, 5))
    sub = {str(int(rng.integers(1 << 46, 1 << 47))): {"num_run": 0, "core": -1} for _ in range(threads - 1)}
    runs, batch = int(rng.integers(1, 5)), int(rng.choice([1, 8, 32, 128]))
    durs = _durations(rng, nodes, runs, tie)
    events: list[dict[str, Any]] = []
    ts = 3

    def add(cat: str, name: str, dur: int, args: dict[str, Any]) -> None:
        nonlocal ts
        events.append({"cat": cat, "pid": pid, "tid": pid, "dur": dur, "ts": ts, "ph": "X", "name": name, "args": args})
        ts += dur + int(rng.integers(1, 6))

    add("Session", "model_loading_uri", int(rng.integers(200, 2000)), {})
    add("Session", "session_initialization", int(rng.integers(2000, 20000)), {})
    for run in range(runs):
        start = ts
        for index, (name, op, _us) in enumerate(nodes):
            if fences:
                add("Node", name + FENCES[0], int(rng.integers(0, 4)), {"op_name": op})
            args = {"op_name": op, "provider": "CPUExecutionProvider", "node_index": str(index)}
            args.update(_shape_args(rng, batch, op))
            if threads > 1:
                args["thread_scheduling_stats"] = {
                    "main_thread": {"thread_pool_name": "session-1-intra-op"},
                    "sub_threads": sub,
                }
            add("Node", name + KERNEL, int(durs[run, index]), args)
            if fences:
                add("Node", name + FENCES[1], int(rng.integers(0, 3)), {"op_name": op})
        add("Session", "SequentialExecutor::Execute", ts - start, {})
        add("Session", "model_run", ts - start + 3, {})
    if fences:  # the operator with the most kernel time waits too: counting fences changes the answer
        top = reference_top_ops(events, 1)[0][0]
        fence = next(e for e in events if e["name"].endswith(FENCES[0]) and e["args"]["op_name"] == top)
        fence["dur"] = max(fence["dur"], 1)
    return json.dumps(events).encode()


OWN_GROUP = "own"  # top_ops on the notebook's own profile: what RESULTS["top_ops"] must be
OWN_CASE = f"{FUNCTION}/{OWN_GROUP}/0"


def own_case(path: str, k: int) -> ProbeCase:
    """``top_ops`` on the profile the notebook saved (``Arg.artifact``): nothing hidden, only the
    student's answer on their own file, which ``RESULTS["top_ops"]`` must repeat."""
    return ProbeCase(OWN_CASE, FUNCTION, (Arg.artifact(path), k), {}, OWN_GROUP)


def probe_cases() -> list[ProbeCase]:
    """One call per hidden profile, ``top_ops(path, k)``, grouped as in :data:`GROUPS`; drawn for
    the submission being graded (``hidden_secret.submission_generator``)."""
    rng = hidden_secret.submission_generator(PROBE_STREAM)
    cases = []
    for group, (count, fences, tie) in GROUPS.items():
        for i in range(count):
            data = hidden_profile(rng, fences, tie)
            k = int(rng.integers(K_RANGE[0], K_RANGE[1] + 1))
            cases.append(ProbeCase(f"{FUNCTION}/{group}/{i}", FUNCTION, (Arg.file(data, "profile.json"), k), {}, group))
    return cases


def expect_top_ops(case: ProbeCase) -> Any:
    """``[(op_type, total_us)]``: names exactly, totals exactly (an int or a float of it)."""
    events = json.loads(case.raw(0))
    return Expect(
        [[op, Expect(float(us), tolerance=EXACT)] for op, us in reference_top_ops(events, int(case.raw(1)))],
        unit="µs",
    )
