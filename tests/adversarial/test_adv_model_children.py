"""One hostile model among a submission's models costs the student only that model's measurement.

A submission's models share its measuring children (autograder/measure/warm_pool.py): here all
three in one child (``most=1``, as in ``batch -j 2`` on 2 cores). A table of failures at positions
1, 2 and 3: the failing model gets its own reason, the others are measured as if alone, and a child
that crashed or hung is replaced by a fresh one for the models after it (a refused or unrunnable
model leaves its child usable). Real children, jailed where bwrap works; real hostile models, except
the crash, for which no model is known to crash ONNX Runtime: a stand-in kills its child from
inside the worker when it reads the model bytes ``crash``.
"""

from __future__ import annotations

import sys

import numpy as np
import onnx_models
import pytest
from needs import needs

from autograder.measure import warm_pool, worker_process
from autograder.measure.onnx_load import LoadLimits, run_model_worker

TIMEOUT_S = 8.0  # the per-job limit here; a fine model's job takes well under a second
LIMITS = LoadLimits(timeout_s=TIMEOUT_S)
X = np.random.default_rng(7).normal(size=(32, 2)).astype(np.float32)

# the real worker, with the crash stand-in: a model whose bytes are b"crash" kills its child
CRASHING_WORKER = """
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from autograder.measure import model_worker
real = model_worker.work
def work(job_dir):
    if (job_dir / "model.onnx").read_bytes() == b"crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    return real(job_dir)
model_worker.work = work
sys.exit(model_worker.main(sys.argv[1:]))
"""

FAILURES = {
    # kind: (model, where the reason is, a fragment of it, does the child survive)
    "crash": (b"crash", "reason", "crashed the ONNX checker or ONNX Runtime (SIGSEGV", False),
    "timeout": (onnx_models.loop_forever(), "reason", f"longer than the {TIMEOUT_S:.0f} s limit", False),
    "oversize": (onnx_models.constant_of_shape_bomb(), "run_error", "memory allocation failure", True),
    "refused": (onnx_models.custom_domain(), "reason", "com.evil", True),
}


def fine_model(scale: float) -> bytes:
    """``probabilities = Softmax(scale · X)``: each position's own, to tell the results apart."""
    from onnx import helper, numpy_helper

    s = numpy_helper.from_array(np.array(scale, np.float32), "s")
    nodes = [helper.make_node("Mul", ["X", "s"], ["logits"])] + onnx_models._head("logits")
    return onnx_models._model(nodes, [s]).SerializeToString()


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.fixture
@needs("kernel")  # real measuring children, jailed where bwrap works
def crashing_worker(monkeypatch):
    monkeypatch.setattr(
        worker_process,
        "_worker_command",
        lambda job_dir: [sys.executable, "-I", "-c", CRASHING_WORKER, worker_process._PACKAGE_PARENT, str(job_dir)],
    )
    served: list[tuple[int, bytes]] = []  # (child's pid, model) per job, in order
    original = worker_process.WorkerProcess.run

    def run(self, files):
        served.append((self.proc.pid, files["model.onnx"]))
        return original(self, files)

    monkeypatch.setattr(worker_process.WorkerProcess, "run", run)
    return served


@pytest.mark.parametrize("position", [0, 1, 2])
@pytest.mark.parametrize("kind", sorted(FAILURES))
def test_a_failing_model_is_its_own_failure_and_the_others_are_measured(crashing_worker, kind, position):
    bad, where, fragment, survives = FAILURES[kind]
    models = [fine_model(float(i + 1)) for i in range(3)]
    models[position] = bad
    with warm_pool.warm_workers(1, LIMITS) as children:
        runs = [run_model_worker(m, inputs={"set": X}, limits=LIMITS, children=children) for m in models]
        started = list(children._children)
    for i, run in enumerate(runs):
        if i == position:
            said = run.reason if where == "reason" else run.result.get("run_error")
            assert said and fragment in said, f"{kind} at {i + 1}: {run.reason!r} / {run.result.get('run_error')!r}"
            continue
        assert run.ok and not run.result.get("run_error"), f"model {i + 1} paid for the {kind} at {position + 1}: {run}"
        np.testing.assert_allclose(run.outputs["set__probabilities"], softmax((i + 1) * X), rtol=1e-5, atol=1e-6)
    pids = [pid for pid, _ in crashing_worker]
    assert len(pids) == 3
    assert len(set(pids[: position + 1])) == 1, "models up to the failure share one child"
    if position < 2:
        same = pids[position + 1] == pids[position]
        assert same == survives, f"after a {kind} the next model should {'keep' if survives else 'get a fresh'} child"
    for child in started:
        assert child.proc.poll() is not None and not child.job_dir.exists(), "a child outlived the submission"
