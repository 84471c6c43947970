"""The probe: cells run after the student's cells in the same kernel, one case at a time.

1. :func:`setup_source` defines the probe's state in the kernel, and writes which functions
   exist (``probe_report.json``) and ``RESULTS`` (``reported.json``) before any hidden input
   reaches the kernel; the grader takes its copies right after this cell (:mod:`.execute`);
2. :func:`case_source`, once per case: that case's arguments inline (autograder/probe_format.py),
   decoded (a file argument written to a folder of that call's own, removed as soon as it
   returns), passed to the student's function under a per-call alarm; the result, encoded as
   JSON-like nodes (autograder/probe_format.py, "Result encoding"), goes with its record to
   ``probe_case.json`` and its NumPy values to ``probe_case.npz``, which the grader reads before
   it sends the next case. So the kernel never holds inputs of calls still to come, no file
   holds any but a call's own file arguments while it runs, and what the grader keeps of call k
   was fixed before call k+1;
3. :func:`finish_source` deletes the probe's names and files.

The grader assembles ``probe_outputs.npz`` and ``probe_report.json`` itself from what it read
(:mod:`.probe_run`), and trusts nothing else the probe says. The kernel-side code is
self-contained (the standard library and numpy) and prints nothing.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from ..probe_format import FILE_NAME, RESULT_LIMITS, ResultLimits

STATE = "__autograder_probe"

SETUP_BODY = r"""
def __autograder_probe_setup(out_dir, functions, results_variable, case_timeout_s, max_bytes, limits, file_name):
    import base64, json, os, re, shutil, signal, tempfile, traceback
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

    temp_root = tempfile.gettempdir()

    def place_file(spec, folder):
        # a fresh private folder for this one call (made at its first file), the file in it
        name = spec["name"]
        if not re.fullmatch(file_name, name):
            raise ValueError("the probe refuses the file name %r" % name)
        if folder[0] is None:
            folder[0] = tempfile.mkdtemp(prefix="probe-call-", dir=temp_root)
        path = os.path.join(folder[0], name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(base64.b64decode(spec["data"]))
        return path

    def remove_folder(top):
        # the call may have changed modes below it: give them back, then remove all of it
        for _ in range(3):
            if not os.path.lexists(top):
                return
            try:
                if not os.path.islink(top):
                    os.chmod(top, 0o700)
                for root, dirs, _files in os.walk(top):
                    for d in dirs:
                        p = os.path.join(root, d)
                        if not os.path.islink(p):
                            os.chmod(p, 0o700)
            except OSError:
                pass
            try:
                if os.path.islink(top) or not os.path.isdir(top):
                    os.unlink(top)
                else:
                    shutil.rmtree(top, ignore_errors=True)
            except OSError:
                pass

    def decode(a, folder):
        (kind, v), = a.items()
        if kind == "array":
            return array(v)
        if kind == "list":
            return array(v).tolist()
        if kind == "scalar":
            return array(v)[()]
        if kind == "dtype":
            return np.dtype(v).type
        if kind == "strings":
            return [str(x) for x in v]
        if kind == "file":
            return place_file(v, folder)
        return {"float": float, "int": int, "bool": bool, "str": str}[kind](v)

    class Unconvertible(Exception):
        pass

    def encode(result, i):
        # the result as JSON-like nodes; NumPy values go to ``arrays`` (probe_format: "Result encoding").
        # Base-class methods read subclasses (Counter, namedtuple, IntEnum), so no method of the
        # student's classes runs here.
        arrays = {}
        counts = {"leaves": 0, "strings": 0}

        def string(x):
            x = str.__str__(x)
            if counts["strings"] + len(x) > limits["string_bytes"]:     # never encode a huge one
                raise Unconvertible("more than %d bytes of strings" % limits["string_bytes"], "strings")
            counts["strings"] += len(x.encode("utf-8", "surrogatepass"))
            if counts["strings"] > limits["string_bytes"]:
                raise Unconvertible("more than %d bytes of strings" % limits["string_bytes"], "strings")
            return x

        def numpy(kind, a):
            key = "c%d_%d" % (i, len(arrays))
            arrays[key] = a
            return {kind: key}

        def walk(x, depth):
            t = type(x)        # never isinstance: a __class__ property is the student's code
            if issubclass(t, (dict, list, tuple)):
                if depth >= limits["depth"]:
                    raise Unconvertible("nested more than %d deep" % limits["depth"], "depth")
                if issubclass(t, dict):
                    pairs = []
                    for k, v in dict.items(x):
                        if not issubclass(type(k), str):
                            raise Unconvertible("a dict key of type %s (keys must be str)" % type(k).__name__)
                        pairs.append([string(k), walk(v, depth + 1)])
                    return {"dict": pairs}
                items = list.__iter__(x) if issubclass(t, list) else tuple.__iter__(x)
                return {"list" if issubclass(t, list) else "tuple": [walk(v, depth + 1) for v in items]}
            counts["leaves"] += 1
            if counts["leaves"] > limits["leaves"]:
                raise Unconvertible("more than %d values" % limits["leaves"], "leaves")
            if x is None:
                return {"none": None}
            if issubclass(t, np.generic):
                if issubclass(t, str):
                    return {"str": string(x)}
                a = np.asarray(x)
                if a.dtype.kind in "biufc":
                    return numpy("scalar", a)
                raise Unconvertible("a NumPy value of dtype %s" % a.dtype)
            if issubclass(t, np.ndarray):
                a = np.asarray(x)
                if a.dtype.kind not in "biufc":
                    raise Unconvertible("an array of dtype %s" % a.dtype)
                return numpy("array", a)
            if issubclass(t, bool):
                return {"bool": x is True}
            if issubclass(t, int):
                v = int.__int__(x)
                if not -2**63 <= v <= 2**64 - 1:
                    raise Unconvertible("an int beyond 64 bits", "int")
                return {"int": v}
            if issubclass(t, float):
                return {"float": float.__float__(x)}
            if issubclass(t, complex):
                return numpy("complex", np.array(x, dtype=np.complex128))
            if issubclass(t, str):
                return {"str": string(x)}
            raise Unconvertible("a value of type %s" % type(x).__name__)

        node = walk(result, 0)
        (kind, v), = node.items()
        if kind in ("array", "scalar", "complex"):       # one NumPy value: key c<i>, as before
            arrays = {"c%d" % i: arrays[v]}
            node = {kind: "c%d" % i}
        size = len(json.dumps(node))
        if size > limits["encoded_bytes"]:
            raise Unconvertible("its encoding is more than %d bytes" % limits["encoded_bytes"], "encoded")
        return node, arrays, size + sum(a.nbytes for a in arrays.values())

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
        folder = [None]
        try:
            args = [decode(a, folder) for a in case["args"]]
            kwargs = {k: decode(v, folder) for k, v in case["kwargs"].items()}
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
            if folder[0] is not None:            # the call's files go as soon as it returned
                remove_folder(folder[0])
        rec["python_type"] = type(result).__name__
        try:
            node, arrays, size = encode(result, i)
            if total[0] + size > max_bytes:
                raise Unconvertible("all results together are too large", "total")
        except Exception as e:     # a lying object (a __class__ property) ends up here too
            rec["status"] = "unconvertible"
            rec["error"] = {"type": "ProbeError", "message": "%s returned %s (not JSON-like: %s)"
                            % (fname, type(result).__name__, str(e.args[0] if e.args else e)[:300]), "traceback": ""}
            if isinstance(e, Unconvertible) and len(e.args) > 1:
                rec["error"]["limit"] = e.args[1]
            return
        total[0] += size
        rec["value"] = node
        if isinstance(result, (tuple, list)):
            rec["parts"] = len(result)
        outputs.update(arrays)

    def finish():
        for name in ("probe_case.npz", "probe_case.json", "probe_report.json", "reported.json"):
            path = os.path.join(out_dir, name)
            if os.path.lexists(path):
                os.unlink(path)

    return {"call": call, "finish": finish}
"""


def setup_source(
    out_dir: str,
    functions: list[str],
    results_variable: str,
    case_timeout_s: float = 10.0,
    max_bytes: int = 32 * 1024 * 1024,
    limits: ResultLimits = RESULT_LIMITS,
) -> str:
    """The first probe cell: defines the probe's state, writes which ``functions`` exist and RESULTS.
    ``max_bytes``: all results together; ``limits``: one result (probe_format)."""
    call_args = ", ".join(
        json.dumps(v)
        for v in (
            out_dir,
            list(functions),
            results_variable,
            float(case_timeout_s),
            int(max_bytes),
            asdict(limits),
            FILE_NAME.pattern,
        )
    )
    return (
        SETUP_BODY + f"\ntry:\n    {STATE} = __autograder_probe_setup({call_args})\n"
        "finally:\n    del __autograder_probe_setup\n"
    )


def case_source(case: dict) -> str:
    """One probe cell: call the student's function on this case (inline JSON, see probe_format)."""
    return f"{STATE}['call'](__import__('json').loads({json.dumps(json.dumps(case))}))\n"


def finish_source() -> str:
    """The last probe cell: remove the probe's files and names."""
    return f"try:\n    {STATE}['finish']()\nfinally:\n    del {STATE}\n"
