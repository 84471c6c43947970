"""The child process that checks and runs one untrusted ONNX model (see onnx_load).

Started by ``onnx_load`` as ``python -I -c <bootstrap> PACKAGE_PARENT JOB_DIR`` (equivalent to
``python -I -m autograder.measure.model_worker JOB_DIR``); ``JOB_DIR/job.json`` holds::

    {"model": "model.onnx", "baseline": "baseline.onnx" | null, "inputs": "inputs.npz",
     "interface": {...ModelInterface.to_json()...} | null,
     "latency_input": "public_test" | null, "latency_rounds": 50, "latency_baseline": bool,
     "limits": {...LoadLimits...}}

It sets its own resource limits before importing onnx or ONNX Runtime, then writes
``result.json``::

    {"ok": false, "stage": "check" | "session" | "worker", "reason": "..."}
    {"ok": true, "facts": {...graph_facts...}, "derived": {...} | null,
     "run_error": null | "...", "latency": {"model_ms", "baseline_ms"?, "rounds"} | null,
     "latency_error": null | "..."}

and, when the model ran, ``outputs.npz`` with ``<input set>__<output name>`` for every array of
``inputs.npz`` (fed to the one input, each set in one call, as the contract measures) and every
output of the interface (without one: every numeric output). The baseline (the student's fp32
model, already checked by its own worker) is used for ``derived_from`` and, when
``latency_baseline`` (its outputs are usable), for latency, timed interleaved with the model
(A B A B …, medians).
"""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

MiB = 1024 * 1024


def _set_limits(limits: dict) -> None:
    mem = int(limits["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 * MiB, 256 * MiB))
    cpu = int(float(limits["timeout_s"]) * 2) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))


def _run_all(session, inputs: dict, interface) -> tuple[dict, str | None]:
    """Run each input set in one call; return the arrays to keep, or why none can be kept."""
    import numpy as np

    names = [o.name for o in session.get_outputs()]
    feeds = [i.name for i in session.get_inputs()]
    want = [s.name for s in interface.inputs] if interface else feeds[:1]
    if feeds != want or len(want) != 1:
        return {}, f"cannot feed the test set: the model's inputs are {feeds[:5]}, not {want}"
    kept = {}
    for key, x in inputs.items():
        try:
            values = session.run(None, {want[0]: x})
        except Exception as e:
            return {}, f"ONNX Runtime failed to run it on a batch of {len(x)} rows: {' '.join(str(e).split())[:240]}"
        got = dict(zip(names, values))
        if interface is None:
            kept.update({f"{key}__{n}": v for n, v in got.items()
                         if isinstance(v, np.ndarray) and v.dtype.kind in "biuf"})
            continue
        for spec in interface.outputs:
            problem = interface.output_problem(spec, got.get(spec.name), len(x))
            if problem:
                return {}, problem
            kept[f"{key}__{spec.name}"] = got[spec.name]
    return kept, None


def _latency(session, baseline, feed: dict, rounds: int) -> dict:
    """Median ms of one run on ``feed``; model and baseline interleaved so drift hits both alike."""
    from .metrics import interleaved_medians

    runs = {"model": lambda: session.run(None, feed)}
    if baseline is not None:
        runs["baseline"] = lambda: baseline.run(None, feed)
    medians = interleaved_medians(runs, rounds)
    out = {f"{k}_ms": v for k, v in medians.items()}
    out["rounds"] = rounds
    return out


def work(job_dir: Path) -> dict:
    job = json.loads((job_dir / "job.json").read_text())
    _set_limits(job["limits"])

    import numpy as np

    from .graph_facts import derived_from, graph_facts
    from .model_interface import ModelInterface
    from .onnx_load import InvalidModel, LoadLimits, make_session, parse_and_check

    limits = LoadLimits(**job["limits"])
    interface = ModelInterface.from_json(job["interface"]) if job.get("interface") else None
    try:
        model = parse_and_check((job_dir / job["model"]).read_bytes(), limits)
    except InvalidModel as e:
        return {"ok": False, "stage": "check", "reason": str(e)}
    facts = graph_facts(model, interface)
    baseline_model = None
    derived = None
    if job.get("baseline"):
        try:  # checked by its own worker already; this cannot fail unless the job is inconsistent
            baseline_model = parse_and_check((job_dir / job["baseline"]).read_bytes(), limits)
            derived = derived_from(baseline_model, model)
        except InvalidModel:
            baseline_model = None
    try:
        session = make_session(model)
    except InvalidModel as e:
        return {"ok": False, "stage": "session", "reason": str(e)}
    with np.load(job_dir / job["inputs"], allow_pickle=False) as npz:
        inputs = {k: npz[k] for k in npz.files}
    kept, run_error = _run_all(session, inputs, interface)
    latency, latency_error = None, None
    if run_error is None and job.get("latency_input"):
        try:
            base = make_session(baseline_model) if baseline_model is not None and job.get("latency_baseline") else None
            feed = {session.get_inputs()[0].name: inputs[job["latency_input"]]}
            latency = _latency(session, base, feed, int(job["latency_rounds"]))
        except Exception as e:
            latency_error = " ".join(str(e).split())[:240]
    if kept:
        np.savez(job_dir / "outputs.npz", **kept)
    return {"ok": True, "facts": facts, "derived": derived, "run_error": run_error,
            "latency": latency, "latency_error": latency_error}


def main(argv: list[str]) -> int:
    """``argv[1]`` is the job folder (``argv[0]`` is ignored)."""
    job_dir = Path(argv[1])
    try:
        result = work(job_dir)
    except MemoryError:
        result = {"ok": False, "stage": "worker", "reason": "it needs more memory than the limit allows"}
    except Exception as e:  # a bug of ours or a model that breaks a library: data, not a crash
        result = {"ok": False, "stage": "worker",
                  "reason": f"{type(e).__name__}: {' '.join(str(e).split())[:240]}"}
    (job_dir / "result.json").write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
