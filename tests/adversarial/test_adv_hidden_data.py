"""Hostile notebooks that try to carry the grader's hidden probe inputs (and its paths) back to
the student.

Round 2 of the red team got all 61 hidden cases and 52 arrays back bit-exact: the probe's input
files were readable while the student's ``quantize`` ran, and it packed them into ``RESULTS``,
whose unexpected keys were echoed in the feedback. Now the probe sends one case per cell (no
file), the grader keeps ``RESULTS`` and the working directory as they were before the first
hidden input, it reads each call's result before sending the next, and every student-controlled
string is bounded, escaped and cleaned of grader paths.

The attack here plants everything it can see (the arguments of every call so far, anything in
the kernel's memory or on disk that looks like a probe case, ``/proc/self/mountinfo``) into every
channel a notebook controls: ``RESULTS`` keys and values, exception messages, file names, the
probe's own files, stdout and the kernel's raw file descriptors, an artifact's initializer
names, and a thread that rewrites the probe's per-call record. The grader appends a canary case
at the very end of the probe (never a "first mismatch", the one call feedback names by design);
its bytes must not appear anywhere a student reads.
"""

from __future__ import annotations

import base64
import json
import types
from pathlib import Path

import numpy as np
import pytest

from advkit import ROOT, TOKEN, require_mode, student_visible
from autograder import hidden_secret
from autograder.probe_format import Arg, ProbeCase

pytestmark = pytest.mark.slow

# Distinctive float32 values (exactly representable), derived from this session's token.
CANARY = np.array([1000 + int(TOKEN[i : i + 3], 16) % 8000 + 0.8125 for i in range(0, 12, 3)], np.float32)
CANARY_CASE = ProbeCase(
    "quantize/zz_canary", "quantize", (Arg.array(CANARY), 0.5, 0), {"dtype": Arg.dtype("int8")}, group="random"
)


def _with_canary(assignment):
    """The assignment whose probe ends with the canary case (the rest is the real grading)."""
    real = assignment.grading
    proxy = types.SimpleNamespace(**{k: getattr(real, k) for k in dir(real) if not k.startswith("__")})
    proxy.probe_cases = lambda: list(real.probe_cases()) + [CANARY_CASE]
    copy = type(assignment)(
        id=assignment.id,
        folder=assignment.folder,
        reference_folder=assignment.reference_folder,
        config=assignment.config,
    )
    copy.__dict__["grading"] = proxy
    return copy


def _needles(cases: list[ProbeCase]) -> dict[str, str]:
    """Renderings of hidden data that no student-visible text may contain."""
    out = {}
    for v in CANARY:
        out[f"canary value {float(v)!r}"] = repr(float(v))
        out[f"canary value {float(v):.9g}"] = f"{float(v):.9g}"
    raw = CANARY.tobytes()
    out["canary bytes (hex)"] = raw.hex()[:16]
    out["canary bytes (base64)"] = base64.b64encode(raw).decode()[:12]
    for case in cases:  # bulk: a whole array of a real case, in any of the forms the notebook uses
        for a in case.args:
            if isinstance(a, Arg) and a.kind in ("array", "list") and np.asarray(a.value).nbytes >= 64:
                b = np.ascontiguousarray(a.value).tobytes()
                out[f"{case.id} bytes (hex)"] = b.hex()[:64]
                out[f"{case.id} bytes (base64)"] = base64.b64encode(b).decode()[:48]
    return out


PLANT = r"""
import base64, gc, json, os, sys, threading, time
import numpy as np

SEEN = []
RESULTS = {"fp32": {"accuracy": 0.5}}

def _grab():
    found = []
    for p in ("/probe/probe_cases.json", "/probe/probe_inputs.npz", "probe_cases.json", "probe_inputs.npz",
              "/proc/self/mountinfo"):
        try:
            with open(p, "rb") as f:
                found.append(base64.b64encode(f.read(20000)).decode())
        except OSError:
            pass
    for o in gc.get_objects():
        if isinstance(o, dict) and "function" in o and "args" in o:
            found.append(json.dumps(o, default=str)[:20000])
    return found

def _plant(args):
    for a in args:
        arr = np.asarray(a)
        if arr.dtype.kind in "biuf":
            SEEN.append({"hex": arr.tobytes().hex(), "b64": base64.b64encode(arr.tobytes()).decode(),
                         "list": arr.tolist()})
    blob = json.dumps({"seen": SEEN, "grabbed": _grab()}, default=str)
    hexblob = blob.encode().hex()
    RESULTS[blob[:3000]] = blob[:100000]                      # RESULTS keys and values
    RESULTS["fp32"] = {"accuracy": blob[:5000], "size_bytes": blob[:5000]}
    for i in range(0, min(len(hexblob), 4000), 200):          # file names
        open(hexblob[i:i + 200], "w").close()
    os.makedirs("artifacts", exist_ok=True)
    for name in ("reported.json", "probe_report.json", "probe_outputs.npz", "artifacts/fp32.onnx"):
        with open(name, "w") as f:                            # the probe's files and an artifact
            f.write(blob)
    print(blob[:20000])                                       # stdout, and the raw descriptors
    os.write(1, blob[:20000].encode())
    os.write(2, blob[:20000].encode())
    _write_onnx(blob)
    raise ValueError(blob[:20000])                            # exception messages

def _write_onnx(blob):
    try:
        import onnx
        from onnx import helper, TensorProto
        init = helper.make_tensor("w" + blob.encode().hex()[:3000], TensorProto.FLOAT, [-1], [])
        g = helper.make_graph([], "g", [], [], [init])
        onnx.save(helper.make_model(g), "artifacts/int8_dynamic.onnx")
    except Exception:
        pass

def quantize(x, scale, zero_point, dtype=np.int8):
    _plant([x, scale, zero_point])

def dequantize(q, scale, zero_point):
    _plant([q, scale, zero_point])

def choose_qparams(rmin, rmax, dtype=np.uint8, symmetric=False):
    _plant([rmin, rmax])

def _rewrite_records():   # rewrites the probe's per-call record as soon as it appears
    end = time.time() + 60
    while time.time() < end:
        try:
            with open("probe_case.json") as f:
                rec = json.load(f)
            rec["error"] = {"type": "ValueError", "message": json.dumps(SEEN)[:5000], "traceback": ""}
            with open("probe_case.tmp", "w") as f:
                json.dump(rec, f)
            os.replace("probe_case.tmp", "probe_case.json")   # whole: the grader reads this or the probe's
        except Exception:
            pass
        time.sleep(0.001)

threading.Thread(target=_rewrite_records, daemon=True).start()
"""

# the mount table's lines that name the interpreter or this checkout, wherever CI cloned it
MOUNTINFO_ERROR = (
    "raise RuntimeError(' '.join(line for line in open('/proc/self/mountinfo') "
    f"if 'python' in line or 'venv' in line or {str(ROOT)!r} in line))"
)


def _report(g) -> dict:
    return json.loads((g.workspace / "probe_report.json").read_text())


# Each attacking call walks the kernel's objects and writes files: ~0.4 s here, 62 calls, several
# times that on a loaded machine. The probe's budget follows the cell limit (at most 120 s plus a
# round trip per case), so the cell limit is raised: the probe must complete to prove anything.
ATTACK_LIMITS = {"cell_timeout_s": 150, "notebook_timeout_s": 150}


def test_hidden_probe_inputs_and_grader_paths_never_reach_the_student(
    grade_cells, jail_check, jail_mode, limited, wrong_baseline
):
    assignment = _with_canary(limited(**ATTACK_LIMITS))
    g = grade_cells([MOUNTINFO_ERROR, PLANT], name=f"hidden-data-{jail_mode}", assignment=assignment)
    require_mode(g, jail_mode)
    jail_check(g, compare_to=wrong_baseline, gains_allowed=("reported_results",))
    assert g.execution["probe"] == "completed", g.execution_brief()
    with hidden_secret.submission(g.measurements["assignment"]["submission_key"]):
        cases = assignment.grading.probe_cases()  # the inputs this grade drew (they are per submission)
    functions = g.measurements["functions"]
    # every call ran the attack and raised; the racing thread sometimes swaps in the previous
    # call's record, which the grader refuses as not the probe's (the attack's loss, no leak)
    report = _report(g)["cases"]
    assert set(report) == {c.id for c in cases}, "not every case was called"
    odd = {
        k: v
        for k, v in report.items()
        if v["status"] != "raised"
        and not (v["status"] == "unconvertible" and "not the probe's" in v["error"]["message"])
    }
    assert not odd, f"calls that did not run the attack: {odd}"
    assert report[CANARY_CASE.id]["status"] in ("raised", "unconvertible"), report[CANARY_CASE.id]
    first = functions["quantize"]["first_mismatch"]
    assert first["reason"] == "raised" and first["case"] != CANARY_CASE.id, first
    visible = student_visible(g)
    leaked = [what for what, needle in _needles(cases).items() if needle in visible]
    assert not leaked, f"hidden probe data reached results.json/feedback: {leaked}"
    for path in (str(ROOT), str(Path(ROOT).resolve())):
        at = visible.find(path)
        assert at < 0, (
            f"the grader's path {path} reached results.json/feedback: …{visible[max(0, at - 200) : at + 80]!r}"
        )
    first_error = g.execution["first_error"]
    assert first_error and first_error["ename"] == "RuntimeError", g.execution_brief()
    if str(ROOT) in first_error["evalue"]:  # the jail showed the path (the venv lives in the checkout)
        assert "<grader>" in visible, "the mount table's path was neither shown nor redacted?"
    # RESULTS (taken before the probe) is read: its number is recorded (not "present": no model backs it)
    assert g.measurements["reported"]["fields"]["fp32.accuracy"]["reported"] == 0.5, g.measurements["reported"]
    problems = " ".join(g.measurements["reported"]["problems"])
    assert "grabbed" not in problems and "seen" not in problems, problems


FUTURE_SCAN = r"""
import gc, hashlib, os, re, sys
import numpy as np
CALLED = set()
_ID = re.compile(r"[a-z_]+/[a-z0-9_]+")
def _h(text):
    return hashlib.sha256(text.encode()).hexdigest()
def _current_id():
    f = sys._getframe(1)
    while f is not None:
        case = f.f_locals.get("case")
        if isinstance(case, dict) and "id" in case:
            return case["id"]
        f = f.f_back
    return None
def _future_visible():
    texts = [v for o in gc.get_objects() if isinstance(o, dict) for v in o.values() if isinstance(v, str)]
    texts += [v for o in gc.get_objects() if isinstance(o, (list, tuple)) for v in o if isinstance(v, str)]
    for d in (".", "/tmp", "/probe", "/dev/shm"):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            try:
                with open(os.path.join(d, n), errors="replace") as f:
                    texts.append(f.read(1 << 20))
            except OSError:
                pass
    found = {_h(m) for t in texts for m in _ID.findall(t)}
    return len((found & ID_HASHES) - CALLED)
def quantize(x, scale, zero_point, dtype=np.int8):
    CALLED.add(_h(_current_id() or ""))
    # the answer is the exception's type (the grader keeps nothing else of a probed call):
    # ArithmeticError at the first call when no later case was visible, EOFError when some were
    # the whole heap and the folders, at the call whose outcome is judged (the first mismatch):
    # scanning at every call took a template's child, whose heap holds the lesson's libraries,
    # past the probe's budget on a slow machine
    if len(CALLED) == 1:
        raise (ArithmeticError if _future_visible() == 0 else EOFError)("first call")
    raise ValueError("a later call")
"""


def test_the_kernel_never_holds_a_case_before_its_call(grade_cells, jail_check, jail_mode, short_assignment):
    """At the first call, no later case is anywhere in the kernel's memory or files. The notebook
    knows the case ids only as hashes; the first call's exception type (shown as the first
    mismatch) says whether it found any not-yet-called case (the grader keeps only the type of a
    probed call's exception)."""
    import hashlib

    hashes = {hashlib.sha256(c.id.encode()).hexdigest() for c in short_assignment.grading.probe_cases()}
    g = grade_cells([f"ID_HASHES = set({sorted(hashes)!r})\n" + FUTURE_SCAN], name=f"future-scan-{jail_mode}")
    require_mode(g, jail_mode)
    jail_check(g, gains_allowed=("quantize",))
    assert g.execution["probe"] == "completed", g.execution_brief()
    first = g.measurements["functions"]["quantize"]["first_mismatch"]
    assert first["reason"] == "raised" and "ValueError" not in first["got"], f"not the first call: {first}"
    assert "raised ArithmeticError" in first["got"], f"later cases were visible at the first call: {first['got']}"
