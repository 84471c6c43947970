"""Calibrating timing honesty's window (autograder/measure/timing_honesty.py): honest pairs, under load.

Standalone (not part of ``run.py``); run as root where the jail has its sandbox uids. Each round
grades one notebook in the real jail whose honest ``latency_ms(session, x)`` (the median of 100
warm runs, lesson 05's contract) and ``latency_table(path, batch_sizes, threads)`` are paired by
the probe with its own timer (A B A B), beside ``--hogs`` CPU hogs (``tests/stress.py``'s: a
child each, bounded, killed by pid at the end). It prints, per entry, every pair's ratio
``max(student/grader, grader/student)`` and the median the rubric judges; the worst of those is
what the window must hold with a wide margin (bench/RESULTS.md, "Timing honesty").

    .venv/bin/python bench/bench_timing_honesty.py --rounds 3 --hogs 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autograder.limits import ExecutionLimits  # noqa: E402
from autograder.measure.timing_honesty import latency_pairing, measure_pairing, table_pairing  # noqa: E402
from autograder.probe_format import Arg, read_probe_result  # noqa: E402
from autograder.sandbox import ProbeSpec, run_submission  # noqa: E402

HOG = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"

NOTEBOOK = r"""
import os, time
import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

def build(widths=(16, 256, 256, 4)):
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        inits.append(numpy_helper.from_array(rng.normal(0, 0.1, (a, b)).astype(np.float32), f"W{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"W{i}"], [f"h{i}"]))
        prev = f"h{i}"
        if i < len(widths) - 2:
            nodes.append(helper.make_node("Relu", [prev], [f"r{i}"]))
            prev = f"r{i}"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", widths[0]])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, ["N", widths[-1]])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

os.makedirs("artifacts", exist_ok=True)
with open("artifacts/mlp.onnx", "wb") as f:
    f.write(build().SerializeToString())

def latency_ms(session, x, runs=100):
    feeds = {session.get_inputs()[0].name: x}
    for _ in range(10):
        session.run(None, feeds)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1000

def latency_table(path, batch_sizes, threads):
    table = {}
    for t in threads:
        so = ort.SessionOptions()
        so.intra_op_num_threads = t
        session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        for b in batch_sizes:
            x = np.linspace(-1, 1, b * 16, dtype=np.float32).reshape(b, 16)
            table[(b, t)] = latency_ms(session, x, runs=50)
    return table

def constant_ms(session, x):
    return 0.5
"""

X = Arg.array(__import__("numpy").linspace(-3, 3, 256 * 16, dtype="float32").reshape(256, 16))
MODEL = Arg.artifact("artifacts/mlp.onnx")


def pairings(repeats: int):
    return [
        latency_pairing("lat1", "latency_ms", Arg.session(MODEL, intra_op_num_threads=1), X, repeats=repeats),
        latency_pairing("lat2", "latency_ms", Arg.session(MODEL, intra_op_num_threads=2), X, repeats=repeats),
        latency_pairing("latdefault", "latency_ms", Arg.session(MODEL), X, repeats=repeats),
        table_pairing("table", "latency_table", MODEL, [1, 64, 256], [1, 2], repeats=repeats),
        latency_pairing("constant", "constant_ms", Arg.session(MODEL, intra_op_num_threads=1), X, repeats=repeats),
    ]


def one_round(folder: Path, repeats: int) -> dict:
    nb = folder / "timing.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell(NOTEBOOK)]), nb)
    ws = folder / "ws"
    pairs = pairings(repeats)
    cases = [c for p in pairs for c in p.cases()]
    limits = ExecutionLimits(cell_timeout_s=300, notebook_timeout_s=600)
    rec = run_submission(nb, ws, limits=limits, probe=ProbeSpec(cases, sorted({c.function for c in cases})), slot=5)
    result = read_probe_result(ws, cases, rec["probe"] == "completed")
    return {
        "status": rec["status"],
        "probe": rec["probe"],
        "mode": rec["isolation"]["mode"],
        **{p.id: measure_pairing(p, result) for p in pairs},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5, help="pairs per pairing")
    parser.add_argument("--hogs", type=int, default=0, help="CPU hogs beside the grading")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    hogs = [subprocess.Popen([sys.executable, "-c", HOG.format(seconds=1800)]) for _ in range(args.hogs)]
    rounds = []
    try:
        for r in range(args.rounds):
            with tempfile.TemporaryDirectory(prefix="bench-timing-") as tmp:
                os.chmod(tmp, 0o711)
                rounds.append(one_round(Path(tmp), args.repeats))
            print(f"round {r + 1}: load {os.getloadavg()[0]:.1f}", file=sys.stderr)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    for i, rnd in enumerate(rounds):
        print(f"## round {i + 1} ({rnd['mode']}, {rnd['status']}, probe {rnd['probe']})")
        for name, facts in rnd.items():
            if not isinstance(facts, dict):
                continue
            if facts["error"]:
                print(f"{name}: {facts['error']}")
                continue
            for key, e in facts["entries"].items():
                pairs = ", ".join(f"{x:.2f}" for x in e["ratios"])
                print(f"{name} {key}: median {e['ratio']:.3f} (pairs {pairs}); grader ms {e['grader_ms'][0]:.3f}")
    if args.json:
        args.json.write_text(json.dumps(rounds, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
