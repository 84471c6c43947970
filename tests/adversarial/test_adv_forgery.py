"""Hostile notebooks that forge the grader's data: results.json wherever it might live, the
probe's files written before the probe (then the kernel dies), the probe's files rewritten behind
its back by a thread, pickles, NaNs, and a sabotaged probe (patched numpy, json, open).

The grader trusts the probe's files only when the probe cell completed, reads them as plain data
(JSON, npz without pickles) and compares them with its own reference outside the kernel: none of
this may gain a point.
"""

from __future__ import annotations

import base64
import importlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

from advkit import MARK, TOKEN, WRONG_FUNCTIONS, read_json, require_mode
from autograder import hidden_secret
from autograder.probe_format import read_probe_result

pytestmark = pytest.mark.slow

FUNCTION_CHECKS = ("quantize", "dequantize", "choose_qparams")

CORRECT_DEQUANTIZE = """\
import numpy as np
def dequantize(q, scale, zero_point):
    q = np.asarray(q)
    return ((q.astype(np.int32) - np.int32(zero_point)).astype(np.float32) * np.float32(scale)).astype(np.float32)
"""


def _functions_module(assignment):
    return importlib.import_module(assignment.grading.__name__ + ".functions")


def _perfect_probe_files(assignment) -> dict[str, bytes]:
    """The probe's three files holding exactly the reference's answers to every hidden case."""
    fn = _functions_module(assignment)
    cases = assignment.grading.probe_cases()
    arrays, report = {}, {"cases": {}, "functions": {n: "defined" for n in FUNCTION_CHECKS}}
    for i, c in enumerate(cases):
        exp = fn.EXPECTATIONS[c.function](c)
        if isinstance(exp, tuple):
            for j, e in enumerate(exp):
                arrays[f"c{i}_{j}"] = np.asarray(e.value)
            report["cases"][c.id] = {"status": "ok", "parts": len(exp), "python_type": "tuple"}
        else:
            arrays[f"c{i}"] = np.asarray(exp.value)
            report["cases"][c.id] = {"status": "ok", "python_type": "ndarray"}
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    reported = {
        v: {"size_bytes": 1000, "accuracy": 0.96, "latency_ms": 0.5, "max_rel_drift": 0.01, "edge_max_rel_drift": 0.1}
        for v in ("fp32", "int8_dynamic", "int8_qdq")
    }
    return {
        "probe_outputs.npz": buf.getvalue(),
        "probe_report.json": json.dumps(report).encode(),
        "reported.json": json.dumps(reported).encode(),
    }


def _empty_cases(assignment) -> dict[str, int]:
    """Per function, the hidden cases whose answer is empty (anything of that shape agrees)."""
    fn = _functions_module(assignment)
    out = dict.fromkeys(FUNCTION_CHECKS, 0)
    for c in assignment.grading.probe_cases():
        exp = fn.EXPECTATIONS[c.function](c)
        parts = exp if isinstance(exp, tuple) else (exp,)
        out[c.function] += all(np.asarray(p.value).size == 0 for p in parts)
    return out


def _write_files_cell(files: dict[str, bytes]) -> str:
    blobs = {name: base64.b64encode(data).decode() for name, data in files.items()}
    return f"""\
import base64
for _name, _blob in {blobs!r}.items():
    with open(_name, "wb") as _f:
        _f.write(base64.b64decode(_blob))
"""


def _function_measure(g, name: str) -> dict:
    functions = g.measurements.get("functions", {})
    return functions.get(name, functions) if isinstance(functions, dict) else {}


# ----------------------------------------------------------------------------- results.json
def test_forged_results_json_anywhere_is_ignored(grade_cells, jail_check, jail_mode):
    """results.json (and the stage files) written to every guessable place never become the grade."""
    base = Path(tempfile.mkdtemp(prefix=f"adv-out-{TOKEN}-"))
    os.chmod(base, 0o755)
    out = base / "out"
    out.mkdir(mode=0o777)
    os.chmod(out, 0o777)  # only the jail stands between the kernel and the grader's output folder
    targets = [
        "results.json",
        "../results.json",
        "/tmp/results.json",
        "/autograder/results/results.json",
        str(out / "results.json"),
        str(out / "grade.json"),
        str(out / "measurements.json"),
        str(out / "execution.json"),
        str(out / "feedback.md"),
    ]
    cell = f"""\
import os, json
forged = {{"score": 100.0, "output": MARK, "tests": [{{"score": 100, "max_score": 100, "name": MARK}}]}}
outcome = {{}}
for p in {targets!r}:
    try:
        os.makedirs(os.path.dirname(p) or ".", exist_ok=True)
        with open(p, "w") as f:
            json.dump(forged, f)
        outcome[p] = "written"
    except BaseException as e:
        outcome[p] = "ERR " + type(e).__name__
_record("forged", outcome)
"""
    try:
        g = grade_cells([cell], name=f"forge-results-{jail_mode}", out=out)
        require_mode(g, jail_mode)
        jail_check(g)
        outcome = g.record("forged")
        assert outcome.get("results.json") == "written", f"the notebook could not even write its own folder: {outcome}"
        # Inside bwrap the same path may exist in the jail's own /tmp: what matters is the host's folder.
        for f in out.iterdir():
            assert MARK not in f.read_text(errors="replace"), f"{f.name} holds the forged content"
        assert MARK not in json.dumps(read_json(out / "results.json"))
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ----------------------------------------------------------------------------- probe files before the probe
@pytest.mark.kernel
def test_perfect_probe_files_are_really_perfect(short_assignment, tmp_path):
    """Control for the test below: these files, if the probe had written them, earn every function point."""
    fn = _functions_module(short_assignment)
    for name, data in _perfect_probe_files(short_assignment).items():
        (tmp_path / name).write_bytes(data)
    cases = short_assignment.grading.probe_cases()
    measured = fn.measure_functions(cases, read_probe_result(tmp_path, cases, True))
    for name in FUNCTION_CHECKS:
        assert measured[name]["agree"] == measured[name]["cases"], f"{name}: {measured[name]['first_mismatch']}"


STOP_BEFORE_PROBE = {
    "os_exit": "import os\nos._exit(0)",
    "sigkill_self": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
    "probe_raises": "import json as _j2\n_j2.load = lambda *a, **k: 1 / 0\n_j2.loads = _j2.load",
    "timeout_uninterruptible": "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
}


@pytest.mark.parametrize("stop", sorted(STOP_BEFORE_PROBE))
def test_probe_files_written_before_the_probe_earn_nothing(
    grade_cells, jail_check, short_assignment, stop, monkeypatch
):
    """The reference's exact answers, pre-written as the probe's files, then the probe never completes.
    Cases are drawn per submission, and a notebook cannot hold the answers to its own key: the key
    is pinned to the one the answers were computed for, so the files are really perfect."""
    monkeypatch.setattr(hidden_secret, "notebook_submission_key", lambda _notebook: hidden_secret.NO_SUBMISSION)
    cells = [_write_files_cell(_perfect_probe_files(short_assignment)), WRONG_FUNCTIONS, STOP_BEFORE_PROBE[stop]]
    g = grade_cells(cells, name=f"prewritten-{stop}")
    jail_check(g)
    assert g.execution.get("probe") != "completed", f"the probe cannot have completed: {g.execution_brief()}"
    for name in FUNCTION_CHECKS:
        assert g.score(name) == 0, f"{name} scored {g.score(name)} from files the probe never wrote"
    functions = g.measurements.get("functions", {})
    assert "error" in functions, f"functions were measured from files the probe never wrote: {functions}"


# ----------------------------------------------------------------------------- rewriting behind the probe
# An IPython hook that runs right after each cell's code, before its reply is sent: after the
# probe's cell it replaces the files the probe just wrote (deterministic, no race to win).
FORGER = r"""
import io, os, json as _jj, numpy as _np
def _genuine():
    try:
        with open("probe_report.json") as f:
            rep = _jj.load(f)
        with _np.load("probe_outputs.npz", allow_pickle=False) as z:
            arrs = {k: z[k] for k in z.files}
        return rep, arrs
    except Exception:
        return None
def _forge_after_probe(result):
    source = getattr(getattr(result, "info", None), "raw_cell", "") or ""
    got = _genuine() if "__autograder_probe" in source else None
    if got is None:
        return
    for name, data in FORGE(*got).items():
        with open(name, "wb") as f:
            f.write(data)
get_ipython().events.register("post_run_cell", _forge_after_probe)
"""

FORGERIES = {
    # every case "ok", as a tuple of zero values: nothing to compare, so nothing may agree
    "ok_without_values": r"""
def FORGE(rep, arrs):
    cases = {cid: {"status": "ok", "parts": 0} for cid in rep["cases"]}
    buf = io.BytesIO(); _np.savez(buf)
    return {"probe_report.json": _jj.dumps({"cases": cases, "functions": rep["functions"]}).encode(),
            "probe_outputs.npz": buf.getvalue()}
""",
    # the genuine shapes and dtypes, values NaN (floats) or 77 (integers)
    "nan_and_garbage": r"""
def FORGE(rep, arrs):
    out = {}
    for k, a in arrs.items():
        out[k] = _np.full(a.shape, _np.nan, a.dtype) if a.dtype.kind in "fc" else _np.full(a.shape, 77, a.dtype)
    cases = {cid: dict(rec, status="ok") for cid, rec in rep["cases"].items()}
    buf = io.BytesIO(); _np.savez(buf, **out)
    return {"probe_report.json": _jj.dumps({"cases": cases, "functions": rep["functions"]}).encode(),
            "probe_outputs.npz": buf.getvalue()}
""",
    # object arrays whose unpickling would create a file on the grader's side; reported.json a pickle
    "pickle_payload": r"""
import io, pickle as _pk
class _Payload:
    def __reduce__(self):
        return (io.open, (PWNED, "w"))  # io.open: IPython shadows open() in the notebook
def FORGE(rep, arrs):
    out = {}
    for k in arrs:
        o = _np.empty(2, dtype=object); o[0] = _Payload(); o[1] = _Payload()
        out[k] = o
    buf = io.BytesIO(); _np.savez(buf, **out)
    return {"probe_outputs.npz": buf.getvalue(), "reported.json": _pk.dumps({"x": _Payload()}),
            "probe_report.json": _pk.dumps(_Payload())}
""",
    # integer literals past Python's 4300-digit limit: json.loads raises a plain ValueError
    "json_int_bomb": r"""
def FORGE(rep, arrs):
    big = "7" * 5000
    return {"reported.json": ('{"fp32": {"size_bytes": ' + big + '}}').encode(),
            "probe_report.json": ('{"cases": {}, "functions": {}, "n": ' + big + '}').encode()}
""",
}


def _forgery_landed(workspace: Path, forgery: str) -> bool:
    """Whether the workspace holds the forger's files (the grader read those, not the probe's)."""
    try:
        report = (workspace / "probe_report.json").read_bytes()
    except OSError:
        return False
    if forgery == "pickle_payload":
        return report.startswith(b"\x80")
    if forgery == "json_int_bomb":
        return b"7" * 5000 in report
    try:
        cases = json.loads(report)["cases"]
    except (ValueError, KeyError, TypeError):
        return False
    if forgery == "ok_without_values":
        return bool(cases) and all(rec.get("parts") == 0 for rec in cases.values())
    with np.load(workspace / "probe_outputs.npz", allow_pickle=False) as z:
        return any(z[k].dtype.kind == "f" and np.isnan(z[k]).any() for k in z.files)


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_probe_files_rewritten_after_the_probe_earn_nothing(
    grade_cells, jail_check, short_assignment, wrong_baseline, forgery
):
    """A post-run hook rewrites the probe's files right after the probe wrote them."""
    pwned = Path(tempfile.gettempdir()) / f"adv-pwned-{TOKEN}-{forgery}"
    cells = [WRONG_FUNCTIONS, f"PWNED = {str(pwned)!r}\n" + FORGERIES[forgery] + FORGER]
    g = grade_cells(cells, name=f"forger-{forgery}")
    jail_check(g, compare_to=wrong_baseline)
    # Whether or not the hook's files replaced the probe's (the probe's cells run silently, so IPython's
    # post_run_cell hooks do not fire after them today), the forger must earn nothing: a skip here
    # would leave the attack untested the day a hook fires again.
    landed = "landed" if _forgery_landed(g.workspace, forgery) else "did not land"
    assert not pwned.exists(), f"the grader unpickled data from the kernel: {pwned} was created"
    empties = _empty_cases(short_assignment)
    for name in FUNCTION_CHECKS:
        m = _function_measure(g, name)
        agree = m.get("agree", 0) if isinstance(m, dict) else 0
        # forged answers agree at most where any answer of the right shape does (empty cases), or,
        # when the forgery did not land, where the wrong functions' own answers already did
        honest = _function_measure(wrong_baseline, name)
        allowed = max(empties[name], honest.get("agree", 0) if isinstance(honest, dict) else 0)
        assert agree <= allowed, (
            f"{name}: {agree} forged answers agreed with the reference "
            f"(at most {allowed} may: {empties[name]} empty cases, the wrong functions' own; forgery {landed}): "
            f"{m.get('first_mismatch')}"
        )
        assert g.score(name) <= wrong_baseline.score(name), (
            f"{name} scored {g.score(name)} from forged probe files (forgery {landed}, {g.execution_brief()})"
        )


# ----------------------------------------------------------------------------- sabotaging the probe
SABOTAGE = {
    "np_asarray_lies": "np.asarray = lambda a, *k, **kw: np.array([1, 2, 3], dtype=np.int8)",
    "np_savez_noop": "np.savez = lambda *a, **k: None",
    "np_savez_raises": "def _boom(*a, **k):\n    raise OSError('no savez for you')\nnp.savez = _boom",
    "builtins_open_redirects": (
        "import builtins\n_open = builtins.open\n"
        "def _evil_open(p, mode='r', *a, **k):\n"
        "    if 'w' in mode or 'x' in mode:\n        p = '/dev/null'\n"
        "    return _open(p, mode, *a, **k)\nbuiltins.open = _evil_open"
    ),
    "numpy_module_replaced": (
        "import sys, types\n_fake = types.ModuleType('numpy')\n"
        "_fake.__getattr__ = lambda name: (lambda *a, **k: None)\nsys.modules['numpy'] = _fake"
    ),
    "alarm_ignored": "import signal\nsignal.signal = lambda *a, **k: None\nsignal.setitimer = lambda *a, **k: 0",
}


@pytest.mark.parametrize("sabotage", sorted(SABOTAGE))
def test_sabotaged_probe_gains_nothing(grade_cells, jail_check, wrong_baseline, sabotage):
    """Patched numpy / json / open / signal before the probe: a grade is produced, quantize earns nothing."""
    wrong_quantize = "def quantize(x, scale, zero_point, dtype=np.int8):\n    return np.zeros(np.shape(x), dtype)\n"
    cells = [CORRECT_DEQUANTIZE, wrong_quantize, SABOTAGE[sabotage]]
    g = grade_cells(cells, name=f"sabotage-{sabotage}")
    jail_check(g, gains_allowed=("dequantize",), compare_to=wrong_baseline)
    assert g.score("quantize") <= wrong_baseline.score("quantize") and g.score("choose_qparams") == 0
    assert g.execution.get("status") in ("completed", "timeout", "kernel_died"), g.execution_brief()


# ----------------------------------------------------------------------------- forged kernel messages
MESSAGE_FORGERIES = {
    # every message the kernel sends (replies, status, outputs) becomes a forged dict
    "json_dumps_forges": (
        "import json as _j3\n_orig = _j3.dumps\n"
        "_j3.dumps = lambda o, *a, **k: _orig({'cases': {}, 'functions': {}, 'score': 100})"
    ),
    # the kernel answers every request at once with a signed "ok" reply and runs nothing
    "session_replies_ok": (
        "k = get_ipython().kernel\n_send = k.session.send\n"
        "def _lie(stream, msg_or_type, content=None, parent=None, *a, **kw):\n"
        "    if msg_or_type == 'execute_reply' and isinstance(content, dict):\n"
        "        content = dict(content, status='ok', execution_count=1)\n"
        "    return _send(stream, msg_or_type, content, parent, *a, **kw)\n"
        "k.session.send = _lie\nraise ValueError('an error the reply will hide')"
    ),
}


@pytest.mark.parametrize("forgery", sorted(MESSAGE_FORGERIES))
def test_forged_kernel_messages_are_the_notebooks_outcome(grade_cells, jail_check, wrong_baseline, forgery):
    """The kernel holds the HMAC key and can send anything: the grade is the notebook's, never a
    "the grader failed" (sandbox_error) and never a point for it."""
    g = grade_cells([WRONG_FUNCTIONS, MESSAGE_FORGERIES[forgery]], name=f"messages-{forgery}")
    jail_check(g, compare_to=wrong_baseline)
    assert g.execution.get("status") != "sandbox_error", (
        f"forged kernel messages are reported as a failure of the grader: {g.execution_brief()}"
    )
