"""The probe: cells run after the student's cells in the same kernel, one case at a time.

1. :func:`setup_source` defines the probe's state in the kernel, and writes which functions
   exist (``probe_report.json``) and ``RESULTS`` (``reported.json``) before any hidden input
   reaches the kernel; the grader takes its copies right after this cell (:mod:`.execute`);
2. :func:`case_source`, once per case: that case's arguments inline (autograder/probe_format.py),
   decoded, passed to the student's function under a per-call alarm; the result, coerced to plain
   number arrays, goes to ``probe_case.npz`` and its record to ``probe_case.json``, which the
   grader reads before it sends the next case. So the kernel never holds inputs of calls still
   to come, no file holds any, and what the grader keeps of call k was fixed before call k+1;
3. :func:`finish_source` deletes the probe's names and files.

The grader assembles ``probe_outputs.npz`` and ``probe_report.json`` itself from what it read
(:mod:`.probe_run`), and trusts nothing else the probe says. The kernel-side code is
self-contained (base64, json, numpy, os, signal, traceback) and prints nothing.
"""

from __future__ import annotations

import json

STATE = "__autograder_probe"

SETUP_BODY = r'''
def __autograder_probe_setup(out_dir, functions, results_variable, case_timeout_s, max_bytes):
    import base64, json, os, signal, tempfile, traceback
    import numpy as np

    ns = globals()
    report = {"functions": {}}
    total = [0]

    def status_of(name):
        if name not in ns:
            return "missing"
        return "defined" if callable(ns[name]) else "not callable"

    def origin_of(name):
        # where a defined function comes from (read before any hidden input exists): its module
        # ("__main__" for a function of the notebook), name and parameter names, bounded
        f, origin = ns.get(name), {}
        try:
            origin["module"] = str(getattr(f, "__module__", None))[:200]
            origin["qualname"] = str(getattr(f, "__qualname__", None))[:200]
            import inspect
            origin["params"] = [str(p)[:50] for p in list(inspect.signature(f).parameters)[:20]]
        except (Exception, SystemExit):
            pass
        return origin

    report["origins"] = {}
    for name in functions:
        report["functions"][name] = status_of(name)
        if report["functions"][name] == "defined":
            report["origins"][name] = origin_of(name)

    def write(name, write_to):
        # a fresh file under a name of its own, then renamed over ``name`` (whatever is there,
        # a symlink included, is replaced, not followed). The package's one os.replace besides
        # safe_files.atomic_replace: this runs in the student's kernel, which imports nothing of
        # the grader (not reachable from the jail, and replaceable by the student's code there)
        fd, tmp = tempfile.mkstemp(prefix=".probe-", dir=out_dir)
        try:
            with os.fdopen(fd, "wb") as f:
                write_to(f)
            os.replace(tmp, os.path.join(out_dir, name))
        except BaseException:
            if os.path.lexists(tmp):
                os.unlink(tmp)
            raise

    def dump_json(data):
        return lambda f: f.write(json.dumps(data).encode())

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
    write("reported.json", lambda f: f.write(reported.encode()))

    def array(d):
        a = np.frombuffer(base64.b64decode(d["data"]), dtype=np.dtype(d["dtype"]))
        return a.reshape(d["shape"]).copy()

    def decode(a):
        (kind, v), = a.items()
        if kind == "array":
            return array(v)
        if kind == "list":
            return array(v).tolist()
        if kind == "scalar":
            return array(v)[()]
        if kind == "dtype":
            return np.dtype(v).type
        return {"float": float, "int": int, "bool": bool, "str": str}[kind](v)

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

    write("probe_report.json", dump_json({"functions": report["functions"], "origins": report["origins"]}))

    def call(case):
        arrays = {}
        rec = {"id": case["id"], "status": "ok"}
        try:
            run_case(case, rec, arrays)
        finally:
            write("probe_case.npz", lambda f: np.savez(f, **arrays))
            write("probe_case.json", dump_json(rec))

    def run_case(case, rec, outputs):
        i, fname = case["index"], case["function"]
        if status_of(fname) != "defined":
            rec["status"] = "missing_function"
            rec["error"] = {"type": "NameError", "message": "%s is %s" % (fname, status_of(fname)), "traceback": ""}
            return
        old_handler = signal.signal(signal.SIGALRM, on_alarm)
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
            return
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler)
        rec["python_type"] = type(result).__name__
        is_seq = isinstance(result, (tuple, list))
        parts = [coerce_one(x) for x in result] if is_seq else [coerce_one(result)]
        size = sum(p.nbytes for p in parts if p is not None)
        if any(p is None for p in parts) or total[0] + size > max_bytes:
            rec["status"] = "unconvertible"
            bad = [type(x).__name__ for x, p in zip(result if is_seq else [result], parts) if p is None]
            why = ("not a number array: %s" % ", ".join(bad)) if bad else "result too large"
            rec["error"] = {"type": "ProbeError", "message": "%s returned %s (%s)"
                            % (fname, type(result).__name__, why), "traceback": ""}
            return
        total[0] += size
        if is_seq:
            rec["parts"] = len(parts)
            for j, p in enumerate(parts):
                outputs["c%d_%d" % (i, j)] = p
        else:
            outputs["c%d" % i] = parts[0]

    def finish():
        for name in ("probe_case.npz", "probe_case.json", "probe_report.json", "reported.json"):
            path = os.path.join(out_dir, name)
            if os.path.lexists(path):
                os.unlink(path)

    return {"call": call, "finish": finish}
'''


def setup_source(out_dir: str, functions: list[str], results_variable: str, case_timeout_s: float = 10.0,
                 max_bytes: int = 32 * 1024 * 1024) -> str:
    """The first probe cell: defines the probe's state, writes which ``functions`` exist and RESULTS."""
    call_args = ", ".join(json.dumps(v) for v in (out_dir, list(functions), results_variable,
                                                   float(case_timeout_s), int(max_bytes)))
    return (SETUP_BODY + f"\ntry:\n    {STATE} = __autograder_probe_setup({call_args})\n"
            "finally:\n    del __autograder_probe_setup\n")


def case_source(case: dict) -> str:
    """One probe cell: call the student's function on this case (inline JSON, see probe_format)."""
    return f"{STATE}['call'](__import__('json').loads({json.dumps(json.dumps(case))}))\n"


def finish_source() -> str:
    """The last probe cell: remove the probe's files and names."""
    return f"try:\n    {STATE}['finish']()\nfinally:\n    del {STATE}\n"
