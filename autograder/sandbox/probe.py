"""The probe: one extra cell, run after the student's cells in the same kernel.

It reads the grader's cases (``probe_cases.json`` + ``probe_inputs.npz``, encoded as
autograder/probe_format.py describes) from a read-only folder, calls each contracted function
case by case, catches every exception, coerces results to plain number arrays and writes
``probe_outputs.npz``, ``probe_report.json`` and ``reported.json`` into the working directory
(removing files of those names first). The grader reads them with
:func:`autograder.probe_format.read_probe_result` and trusts nothing else the probe says.

The source is self-contained (json, numpy, os, signal, traceback), runs inside a function so it
leaves no names behind, and prints nothing.
"""

from __future__ import annotations

import json

PROBE_BODY = r'''
def __autograder_probe(probe_dir, out_dir, functions, results_variable, case_timeout_s, max_bytes):
    import json, os, signal, traceback
    import numpy as np

    ns = globals()
    with open(os.path.join(probe_dir, "probe_cases.json")) as f:
        cases = json.load(f)
    with np.load(os.path.join(probe_dir, "probe_inputs.npz"), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}

    def decode(a):
        (kind, v), = a.items()
        if kind == "array":
            return arrays[v].copy()
        if kind == "list":
            return arrays[v].tolist()
        if kind == "scalar":
            return arrays[v][()]
        if kind == "dtype":
            return np.dtype(v).type
        return {"float": float, "int": int, "bool": bool, "str": str}[kind](v)

    def status_of(name):
        if name not in ns:
            return "missing"
        return "defined" if callable(ns[name]) else "not callable"

    def coerce_one(x):
        if isinstance(x, (np.ndarray, np.generic, bool, int, float, complex)):
            arr = np.asarray(x)
            if arr.dtype.kind in "biufc":
                return arr
        return None

    def error_of(e):
        tb = e.__traceback__.tb_next or e.__traceback__ if e.__traceback__ else None
        text = "".join(traceback.format_exception(type(e), e, tb))
        return {"type": type(e).__name__, "message": str(e)[:1000], "traceback": text[-3000:]}

    class ProbeTimeout(Exception):
        pass

    def on_alarm(signum, frame):
        raise ProbeTimeout("the call took longer than %.0f s" % case_timeout_s)

    report = {"cases": {}, "functions": {}}
    outputs, total = {}, 0
    for name in list(functions) + [c["function"] for c in cases]:
        report["functions"][name] = status_of(name)
    old_handler = signal.signal(signal.SIGALRM, on_alarm)
    try:
        for case in cases:
            i, fname = case["index"], case["function"]
            rec = {"status": "ok"}
            report["cases"][case["id"]] = rec
            if status_of(fname) != "defined":
                rec["status"] = "missing_function"
                rec["error"] = {"type": "NameError", "message": "%s is %s" % (fname, status_of(fname)),
                                "traceback": ""}
                continue
            try:
                args = [decode(a) for a in case["args"]]
                kwargs = {k: decode(v) for k, v in case["kwargs"].items()}
                signal.setitimer(signal.ITIMER_REAL, case_timeout_s)
                try:
                    result = ns[fname](*args, **kwargs)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            except (Exception, SystemExit) as e:
                rec["status"] = "raised"
                rec["error"] = error_of(e)
                continue
            rec["python_type"] = type(result).__name__
            is_seq = isinstance(result, (tuple, list))
            parts = [coerce_one(x) for x in result] if is_seq else [coerce_one(result)]
            size = sum(p.nbytes for p in parts if p is not None)
            if any(p is None for p in parts) or total + size > max_bytes:
                rec["status"] = "unconvertible"
                bad = [type(x).__name__ for x, p in zip(result if is_seq else [result], parts) if p is None]
                why = ("not a number array: %s" % ", ".join(bad)) if bad else "result too large"
                rec["error"] = {"type": "ProbeError", "message": "%s returned %s (%s)"
                                % (fname, type(result).__name__, why), "traceback": ""}
                continue
            total += size
            if is_seq:
                rec["parts"] = len(parts)
                for j, p in enumerate(parts):
                    outputs["c%d_%d" % (i, j)] = p
            else:
                outputs["c%d" % i] = parts[0]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)

    def plain(o):
        if isinstance(o, np.generic) or (isinstance(o, np.ndarray) and o.ndim == 0):
            return o.item()
        raise TypeError("Object of type %s is not JSON serializable" % type(o).__name__)

    if results_variable not in ns:
        reported = json.dumps({"__probe_error__": "%s is not defined" % results_variable})
    else:
        try:
            reported = json.dumps(ns[results_variable], default=plain)
            if len(reported) > 1_000_000:
                raise ValueError("more than 1,000,000 characters of JSON")
        except Exception as e:
            reported = json.dumps({"__probe_error__": "%s is not plain JSON data: %s: %s"
                                   % (results_variable, type(e).__name__, str(e)[:300])})
    paths = {n: os.path.join(out_dir, n) for n in ("probe_outputs.npz", "probe_report.json", "reported.json")}
    for p in paths.values():
        if os.path.lexists(p):
            os.unlink(p)
    np.savez(paths["probe_outputs.npz"], **outputs)
    with open(paths["reported.json"], "x") as f:
        f.write(reported)
    with open(paths["probe_report.json"], "x") as f:
        json.dump(report, f)
'''


def probe_source(probe_dir: str, out_dir: str, functions: list[str], results_variable: str,
                 case_timeout_s: float = 10.0, max_bytes: int = 32 * 1024 * 1024) -> str:
    """The probe cell's code: the function, one call with these (JSON-quoted) arguments, then ``del``."""
    call_args = ", ".join(json.dumps(v) for v in (probe_dir, out_dir, list(functions), results_variable,
                                                   float(case_timeout_s), int(max_bytes)))
    return (PROBE_BODY + f"\ntry:\n    __autograder_probe({call_args})\n"
            "finally:\n    del __autograder_probe\n")
