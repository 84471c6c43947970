"""``make_session(path, intra_op_threads)``: the sessions it returns, as the probe's code describes them.

The probe calls the notebook's ``make_session`` on the model the notebook saved
(``Arg.artifact("artifacts/model.onnx")``) with each thread count of :data:`THREAD_COUNTS` and
describes the returned ``InferenceSession`` with ONNX Runtime's own methods
(``SessionDescription``): the options **as the notebook asked for them**, recorded by the jail
before it gives a pool left at 0 the machine's size. So a ``make_session`` that sets
``inter_op_num_threads`` instead, or nothing, reads 0 here, whatever the machine. Nothing of it
is hidden: the file is the notebook's own and the counts are these.

The section ``sessions``: ``cases``; ``threads_as_asked`` (calls whose session asked for the
count given), ``threads_share``; ``sequential`` (every session returned asked for ``ORT_SEQUENTIAL``, whatever its threads);
``failure`` (the first call that did not give a session asking for its count, in the grader's
words: the count asked, what the session asked for or what the call did).
"""

from __future__ import annotations

from typing import Any

from autograder.lesson import Arg, ProbeCase

FUNCTION = "make_session"
MODEL = "artifacts/model.onnx"
THREAD_COUNTS = (1, 3, 4)  # none of them a pool ONNX Runtime picks by itself on the 2-core graders
SEQUENTIAL = "ORT_SEQUENTIAL"


def probe_cases() -> list[ProbeCase]:
    return [
        ProbeCase(f"{FUNCTION}/threads/{t}", FUNCTION, (Arg.artifact(MODEL), t), {}, "threads") for t in THREAD_COUNTS
    ]


def _why(output: Any, threads: int) -> str | None:
    """None when the call gave a session asking for ``threads`` intra-op threads, else why not."""
    if output is None or output.status != "ok":
        status = "not called" if output is None else output.status
        words = {
            "raised": "raised an exception",
            "bad_artifact": "was not called: artifacts/model.onnx is missing",
            "missing_function": "is not defined",
            "not_run": "was not called (the probe did not reach it)",
        }
        return f"make_session(artifacts/model.onnx, {threads}) {words.get(status, 'returned nothing the probe could read')}"
    value = output.value
    asked = getattr(value, "intra_op_num_threads", None)
    if not hasattr(value, "options_source"):
        return f"make_session(artifacts/model.onnx, {threads}) did not return an InferenceSession"
    if asked != threads:
        return f"make_session(artifacts/model.onnx, {threads}) returned a session asking for {asked} intra-op thread(s) (0: ONNX Runtime's default)"
    return None


def measure_sessions(cases: list[ProbeCase], probe) -> dict[str, Any]:
    """The ``sessions`` section (see the module)."""
    mine = [c for c in cases if c.function == FUNCTION]
    if not probe.ran:
        return {"error": "the probe did not run: make_session could not be called"}
    whys = [_why(probe.cases.get(c.id), int(c.raw(1))) for c in mine]
    ok = [w is None for w in whys]
    returned = [probe.cases[c.id] for c in mine if c.id in probe.cases and probe.cases[c.id].status == "ok"]
    sessions = [o.value for o in returned if hasattr(o.value, "options_source")]
    return {
        "cases": len(mine),
        "threads_as_asked": sum(ok),
        "threads_share": sum(ok) / len(mine) if mine else 0.0,
        "sequential": bool(sessions) and all(getattr(s, "execution_mode", None) == SEQUENTIAL for s in sessions),
        "failure": next((w for w in whys if w is not None), ""),
    }
