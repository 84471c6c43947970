"""The probe's code in the student's kernel: a real module, sent into the kernel as source text.

The kernel cannot import the grader's package (it is not reachable from the jail, and the
notebook's code could replace it there), so :mod:`.probe`'s setup cell carries this file's
text (:func:`source`), runs it as a fresh module and calls :func:`setup` with the kernel's user
namespace. Standard library and numpy only; ``onnxruntime`` (and ``onnx``, for a node count)
only when a case hands over or gets back a session. It prints nothing.

What it does for each case, and the encodings it writes, are autograder/probe_format.py's
contract: arguments decoded (a file in a private folder of that call's own; an artifact
resolved inside the working directory or refused as ``bad_artifact``; a session opened by this
code, never the notebook's), the function called under a per-call alarm, its result encoded as
JSON-like nodes (dicts with str, int, float, bool, None or tuple keys; an ``InferenceSession``
described by this code as a ``{"session": ...}`` node).

A case whose function starts with ``grader:`` calls one of this module's own functions
(:data:`GRADER_FUNCTIONS`), never a name of the notebook: the probe's timers of
autograder/measure/timing_honesty.py. They run ONNX Runtime's binding (``session._sess.run``)
directly, so a notebook that replaced ``InferenceSession.run`` or a method of a session does not
reach them; a notebook that patches the binding itself, the clock or this module once it is in
the kernel can, as it can change anything the probe reads (SECURITY.md, "The probe's data is the
student's word"). Their sessions are cached for the kernel's life, keyed by the file's bytes and
the options (a file rewritten between calls is a new key).
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import time
import traceback
from typing import Any, Callable

import numpy as np

GRADER_PREFIX = "grader:"
REQUESTED_OPTIONS = "_autograder_requested_options"  # what the jail's sitecustomize records on a session
NODE_COUNT_MAX_BYTES = 64 * 1024 * 1024  # a model file read for its node count, at most
ARTIFACT_PART = re.compile(r"[^/\\\0]+")
TYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}
_perf_counter = time.perf_counter  # taken when this module runs: the probe's setup, after the notebook


def source() -> str:
    """This file's text (what the setup cell carries into the kernel)."""
    with open(__file__, encoding="utf-8") as f:
        return f.read()


class Unconvertible(Exception):
    """A result the probe cannot encode: ``(message, limit)``, the limit a name of LIMIT_WORDS."""


class BadArtifact(Exception):
    """An argument the probe refuses to hand over: ``(reason, path)``, a reason of ARTIFACT_REASONS."""


class ProbeTimeout(Exception):
    pass


# ---------------------------------------------------------------- ONNX Runtime: sessions and timers


def _ort() -> Any:
    return importlib.import_module("onnxruntime")


def open_session(path: str, options: dict) -> Any:
    """An ``InferenceSession`` on ``path`` with these options (CPU), opened by the probe's code."""
    ort = _ort()
    so = ort.SessionOptions()
    for key in ("intra_op_num_threads", "inter_op_num_threads"):
        if key in options:
            setattr(so, key, int(options[key]))
    if "graph_optimization_level" in options:
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, str(options["graph_optimization_level"]))
    return ort.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])


def median_run_ms(session: Any, feeds: dict, runs: int) -> float:
    """The median of ``runs`` warm runs of ``session`` on ``feeds``, in ms, through the binding."""
    binding = object.__getattribute__(session, "_sess")
    names = [str(o.name) for o in _ort().InferenceSession.get_outputs(session)]
    for _ in range(max(2, runs // 10)):
        binding.run(names, feeds, None)
    times = []
    for _ in range(max(1, runs)):
        start = _perf_counter()
        binding.run(names, feeds, None)
        times.append(_perf_counter() - start)
    return float(np.median(times)) * 1000.0


def first_input(session: Any) -> Any:
    return _ort().InferenceSession.get_inputs(session)[0]


def batch_of(session: Any, batch: int, x: Any = None) -> np.ndarray:
    """``batch`` rows for the session's first input: ``x``'s rows repeated, or a fixed ramp of its type."""
    if x is not None:
        x = np.asarray(x)
        return np.resize(x, (batch, *x.shape[1:])).astype(x.dtype, copy=False)
    meta = first_input(session)
    shape = [batch] + [d if type(d) is int and d > 0 else 1 for d in list(meta.shape)[1:]]
    dtype = TYPES.get(str(meta.type), np.float32)
    size = int(np.prod(shape))
    return np.linspace(-1.0, 1.0, size).reshape(shape).astype(dtype)


class Timers:
    """The probe's own functions (``grader:<name>``), with their session cache (keyed by content)."""

    def __init__(self) -> None:
        self.sessions: dict[tuple[str, str], Any] = {}

    def session(self, path: str, options: dict) -> Any:
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        key = (digest, json.dumps(options, sort_keys=True))
        if key not in self.sessions:
            self.sessions[key] = open_session(path, options)
        return self.sessions[key]

    def latency_ms(self, session: Any, x: Any, runs: int = 100) -> float:
        """``latency_ms(session, x)``: the median of ``runs`` warm runs on ``x``, in ms."""
        return median_run_ms(session, {str(first_input(session).name): x}, runs)

    def latency_table(
        self, path: str, batch_sizes: list, threads: list, runs: int = 50, x: Any = None, options: Any = None
    ) -> dict:
        """``{(batch, threads): ms}``: the model at ``path`` with ``intra_op_num_threads=threads``
        (and ``options``), timed on ``batch`` rows (:func:`batch_of`)."""
        table = {}
        for t in threads:
            session = self.session(path, {**(options or {}), "intra_op_num_threads": int(t)})
            name = str(first_input(session).name)
            for b in batch_sizes:
                table[(int(b), int(t))] = median_run_ms(session, {name: batch_of(session, int(b), x)}, runs)
        return table

    def functions(self) -> dict[str, Callable[..., Any]]:
        return {GRADER_PREFIX + "latency_ms": self.latency_ms, GRADER_PREFIX + "latency_table": self.latency_table}


def _instance_dict(x: Any) -> dict:
    try:
        d = object.__getattribute__(x, "__dict__")
    except AttributeError:
        return {}
    return d if type(d) is dict else {}


def _enum_name(v: Any) -> str | None:
    name = getattr(v, "name", None)
    return str(name) if name is not None else (None if v is None else str(v))


def node_count(session: Any) -> int | None:
    """The top-level graph's nodes of the file the session was opened from, when cheap to read."""
    path = _instance_dict(session).get("_model_path")
    if not isinstance(path, str):
        return None
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > NODE_COUNT_MAX_BYTES:
            return None
        onnx = importlib.import_module("onnx")
        return len(onnx.load(path, load_external_data=False).graph.node)
    except Exception:  # noqa: BLE001 - no onnx, or a file it cannot read: no count, not a failure
        return None


def session_options(session: Any) -> tuple[dict, str]:
    """The options the notebook asked for (the jail's record) or, without one, the session's own."""
    requested = _instance_dict(session).get(REQUESTED_OPTIONS)
    if type(requested) is dict:
        return {k: requested.get(k) for k in OPTION_NAMES}, "requested"
    so = _ort().InferenceSession.get_session_options(session)
    return {
        "intra_op_num_threads": int(so.intra_op_num_threads),
        "inter_op_num_threads": int(so.inter_op_num_threads),
        "execution_mode": _enum_name(so.execution_mode),
        "graph_optimization_level": _enum_name(so.graph_optimization_level),
    }, "session"


OPTION_NAMES = ("intra_op_num_threads", "inter_op_num_threads", "execution_mode", "graph_optimization_level")


def describe_session(session: Any, string: Callable[[Any], str]) -> dict:
    """A ``{"session": ...}`` node of an ``InferenceSession``, made with ONNX Runtime's own methods
    (a subclass's overrides are not called); ``string`` bounds each str."""
    S = _ort().InferenceSession

    def dim(d: Any) -> Any:
        return d if type(d) is int or d is None else string(d)

    options, where = session_options(session)
    clean = {}
    for key in OPTION_NAMES:
        v = options.get(key)
        clean[key] = v if v is None or type(v) is int else string(v)
    return {
        "session": {
            "inputs": [
                [string(i.name), [dim(d) for d in list(i.shape)], string(i.type)] for i in S.get_inputs(session)
            ],
            "outputs": [string(o.name) for o in S.get_outputs(session)],
            "providers": [string(p) for p in S.get_providers(session)],
            "node_count": node_count(session),
            "options": clean,
            "options_source": where,
        }
    }


def is_session(t: type) -> bool:
    ort = sys.modules.get("onnxruntime")
    cls = getattr(ort, "InferenceSession", None) if ort is not None else None
    return isinstance(cls, type) and issubclass(t, cls)


# ---------------------------------------------------------------- results


def encode(result: Any, i: int, limits: dict) -> tuple[dict, dict, int]:
    """``(node, arrays, size)``: the result as JSON-like nodes, its NumPy values under keys
    ``c{i}`` / ``c{i}_{j}`` (probe_format: "Result encoding"). Base-class methods read subclasses
    (Counter, namedtuple, IntEnum), so no method of the student's classes runs here."""
    arrays: dict[str, np.ndarray] = {}
    counts = {"leaves": 0, "strings": 0}

    def string(x: Any) -> str:
        x = str.__str__(x) if issubclass(type(x), str) else str(x)
        if counts["strings"] + len(x) > limits["string_bytes"]:  # never encode a huge one
            raise Unconvertible("more than %d bytes of strings" % limits["string_bytes"], "strings")
        counts["strings"] += len(x.encode("utf-8", "surrogatepass"))
        if counts["strings"] > limits["string_bytes"]:
            raise Unconvertible("more than %d bytes of strings" % limits["string_bytes"], "strings")
        return x

    def leaf() -> None:
        counts["leaves"] += 1
        if counts["leaves"] > limits["leaves"]:
            raise Unconvertible("more than %d values" % limits["leaves"], "leaves")

    def numpy(kind: str, a: np.ndarray) -> dict:
        key = "c%d_%d" % (i, len(arrays))
        arrays[key] = a
        return {kind: key}

    def integer(v: int) -> dict:
        if not -(2**63) <= v <= 2**64 - 1:
            raise Unconvertible("an int beyond 64 bits", "int")
        return {"int": v}

    def key(k: Any, depth: int) -> Any:
        t = type(k)
        if issubclass(t, str):
            return string(k)  # a str key as itself
        if issubclass(t, tuple):
            if depth >= limits["depth"]:
                raise Unconvertible("nested more than %d deep" % limits["depth"], "depth")
            return {"tuple": [key(v, depth + 1) for v in tuple.__iter__(k)]}
        leaf()
        if k is None:
            return {"none": None}
        if issubclass(t, (bool, np.bool_)):
            return {"bool": bool(k)}
        if issubclass(t, np.integer):
            return integer(int(k))
        if issubclass(t, int):
            return integer(int.__int__(k))
        if issubclass(t, (float, np.floating)) and not issubclass(t, np.longdouble):
            return {"float": float(k)}
        raise Unconvertible("a dict key of type %s (keys must be str, int, float, bool, None or tuples)" % t.__name__)

    def walk(x: Any, depth: int) -> dict:
        t = type(x)  # never isinstance: a __class__ property is the student's code
        if issubclass(t, (dict, list, tuple)):
            if depth >= limits["depth"]:
                raise Unconvertible("nested more than %d deep" % limits["depth"], "depth")
            if issubclass(t, dict):
                return {"dict": [[key(k, depth + 1), walk(v, depth + 1)] for k, v in dict.items(x)]}
            items = list.__iter__(x) if issubclass(t, list) else tuple.__iter__(x)
            return {"list" if issubclass(t, list) else "tuple": [walk(v, depth + 1) for v in items]}
        leaf()
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
            return integer(int.__int__(x))
        if issubclass(t, float):
            return {"float": float.__float__(x)}
        if issubclass(t, complex):
            return numpy("complex", np.array(x, dtype=np.complex128))
        if issubclass(t, str):
            return {"str": string(x)}
        if is_session(t):
            return describe_session(x, string)
        raise Unconvertible("a value of type %s" % t.__name__)

    node = walk(result, 0)
    ((kind, v),) = node.items()
    if kind in ("array", "scalar", "complex"):  # one NumPy value: key c<i>, as before
        arrays = {"c%d" % i: arrays[v]}
        node = {kind: "c%d" % i}
    size = len(json.dumps(node))
    if size > limits["encoded_bytes"]:
        raise Unconvertible("its encoding is more than %d bytes" % limits["encoded_bytes"], "encoded")
    return node, arrays, size + sum(a.nbytes for a in arrays.values())


# ---------------------------------------------------------------- files


def write(out_dir: str, name: str, write_to: Callable[[Any], Any]) -> None:
    """A fresh file under a name of its own, then renamed over ``name`` (whatever is there, a
    symlink included, is replaced, not followed). The package's one os.replace besides
    safe_files.atomic_replace: this runs in the student's kernel, which imports nothing of the grader."""
    fd, tmp = tempfile.mkstemp(prefix=".probe-", dir=out_dir)
    try:
        with os.fdopen(fd, "wb") as f:
            write_to(f)
        os.replace(tmp, os.path.join(out_dir, name))
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def remove_folder(top: str) -> None:
    """Remove a call's folder; the call may have changed modes below it: give them back first."""
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


def resolve_artifact(out_dir: str, relpath: Any) -> str:
    """The real path of the notebook's file ``relpath`` under ``out_dir``; BadArtifact when it is
    missing, not a regular file, or leads outside ``out_dir`` (a link, a malformed path)."""
    top = os.path.realpath(out_dir)
    parts = relpath.split("/") if isinstance(relpath, str) and len(relpath) <= 255 else [""]
    if not all(ARTIFACT_PART.fullmatch(p) and p not in (".", "..") for p in parts):
        raise BadArtifact("outside", str(relpath)[:255])
    path = os.path.join(top, *parts)
    real = os.path.realpath(path)
    if os.path.commonpath([top, real]) != top:
        raise BadArtifact("outside", relpath)
    try:
        st = os.stat(real)
    except OSError:
        raise BadArtifact("missing", relpath) from None
    if not stat.S_ISREG(st.st_mode):
        raise BadArtifact("not_a_file", relpath)
    return real


def array(d: dict) -> np.ndarray:
    a = np.frombuffer(base64.b64decode(d["data"]), dtype=np.dtype(d["dtype"]))
    return a.reshape(d["shape"]).copy()


def error_of(e: BaseException) -> dict:
    tb = e.__traceback__.tb_next or e.__traceback__ if e.__traceback__ else None
    text = "".join(traceback.format_exception(type(e), e, tb))
    return {"type": type(e).__name__, "message": str(e)[:1000], "traceback": text[-3000:]}


# ---------------------------------------------------------------- the probe


class Probe:
    """The probe's state in the kernel; :func:`setup` makes it and writes the pre-call files."""

    def __init__(
        self,
        ns: dict,
        out_dir: str,
        case_timeout_s: float,
        max_bytes: int,
        limits: dict,
        file_name: str,
    ) -> None:
        self.ns, self.out_dir, self.case_timeout_s = ns, out_dir, case_timeout_s
        self.max_bytes, self.limits, self.file_name = max_bytes, limits, file_name
        self.total = 0
        self.temp_root = tempfile.gettempdir()
        self.timers = Timers()
        self.grader = self.timers.functions()

    def status_of(self, name: str) -> str:
        if name.startswith(GRADER_PREFIX):
            return "defined" if name in self.grader else "missing"
        if name not in self.ns:
            return "missing"
        return "defined" if callable(self.ns[name]) else "not callable"

    def origin_of(self, name: str) -> dict:
        """Where a defined function comes from (read before any hidden input exists): its module
        ("__main__" for a function of the notebook), name and parameter names, bounded."""
        f: Any = self.ns.get(name)
        origin: dict[str, Any] = {}
        try:
            origin["module"] = str(getattr(f, "__module__", None))[:200]
            origin["qualname"] = str(getattr(f, "__qualname__", None))[:200]
            import inspect

            origin["params"] = [str(p)[:50] for p in list(inspect.signature(f).parameters)[:20]]
        except (Exception, SystemExit):  # noqa: BLE001 - the student's object: whatever it raises, no origin
            pass
        return origin

    def place_file(self, spec: dict, folder: list) -> str:
        """A fresh private folder for this one call (made at its first file), the file in it."""
        name = spec["name"]
        if not re.fullmatch(self.file_name, name):
            raise ValueError("the probe refuses the file name %r" % name)
        if folder[0] is None:
            folder[0] = tempfile.mkdtemp(prefix="probe-call-", dir=self.temp_root)
        path = os.path.join(folder[0], name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(base64.b64decode(spec["data"]))
        return path

    def decode(self, a: dict, folder: list, grader: bool) -> Any:
        ((kind, v),) = a.items()
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
            return self.place_file(v, folder)
        if kind == "artifact":
            return resolve_artifact(self.out_dir, v)
        if kind == "session":
            path = self.decode(v["path"], folder, grader)
            try:  # the grader's timers keep theirs; a student's call gets a session of its own
                return self.timers.session(path, v["options"]) if grader else open_session(path, v["options"])
            except ProbeTimeout:
                raise
            except Exception as e:  # noqa: BLE001 - whatever ONNX Runtime says of the file: it did not open
                raise BadArtifact("no_session", v["path"].get("artifact") or v["path"]["file"]["name"]) from e
        return {"float": float, "int": int, "bool": bool, "str": str}[kind](v)

    def on_alarm(self, signum: int, frame: Any) -> None:
        raise ProbeTimeout("the call took longer than %.0f s" % self.case_timeout_s)

    def call(self, case: dict) -> None:
        arrays: dict = {}
        rec: dict = {"id": case["id"], "status": "ok"}
        try:
            self.run_case(case, rec, arrays)
        finally:
            write(self.out_dir, "probe_case.npz", lambda f: np.savez(f, **arrays))
            write(self.out_dir, "probe_case.json", lambda f: f.write(json.dumps(rec).encode()))

    def run_case(self, case: dict, rec: dict, outputs: dict) -> None:
        i, fname = case["index"], case["function"]
        if self.status_of(fname) != "defined":
            rec["status"] = "missing_function"
            rec["error"] = {
                "type": "NameError",
                "message": "%s is %s" % (fname, self.status_of(fname)),
                "traceback": "",
            }
            return
        grader = fname.startswith(GRADER_PREFIX)
        function = self.grader[fname] if grader else self.ns[fname]
        old_handler = signal.signal(signal.SIGALRM, self.on_alarm)
        folder: list = [None]
        decoding = True
        try:
            signal.setitimer(signal.ITIMER_REAL, self.case_timeout_s)
            try:
                args = [self.decode(a, folder, grader) for a in case["args"]]
                kwargs = {k: self.decode(v, folder, grader) for k, v in case["kwargs"].items()}
                decoding = False
                result = function(*args, **kwargs)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except (Exception, SystemExit) as e:  # noqa: BLE001 - the student's code: whatever it raised is recorded
            if decoding and type(e) is BadArtifact:  # refused before the call: the grader names why
                rec["status"] = "bad_artifact"
                rec["error"] = {"type": "BadArtifact", "reason": e.args[0], "path": str(e.args[1])[:255]}
                if e.__cause__ is not None:
                    rec["error"]["cause"] = type(e.__cause__).__name__
            else:
                rec["status"] = "raised"
                rec["error"] = error_of(e)
            return
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler)
            if folder[0] is not None:  # the call's files go as soon as it returned
                remove_folder(folder[0])
        rec["python_type"] = type(result).__name__
        try:
            node, arrays, size = encode(result, i, self.limits)
            if self.total + size > self.max_bytes:
                raise Unconvertible("all results together are too large", "total")
        except Exception as e:  # noqa: BLE001 - a lying object (a __class__ property) ends up here too
            rec["status"] = "unconvertible"
            rec["error"] = {
                "type": "ProbeError",
                "message": "%s returned %s (not JSON-like: %s)"
                % (fname, type(result).__name__, str(e.args[0] if e.args else e)[:300]),
                "traceback": "",
            }
            if isinstance(e, Unconvertible) and len(e.args) > 1:
                rec["error"]["limit"] = e.args[1]
            return
        self.total += size
        rec["value"] = node
        if isinstance(result, (tuple, list)):
            rec["parts"] = len(result)
        outputs.update(arrays)

    def finish(self) -> None:
        for name in ("probe_case.npz", "probe_case.json", "probe_report.json", "reported.json"):
            path = os.path.join(self.out_dir, name)
            if os.path.lexists(path):
                os.unlink(path)


def reported_json(ns: dict, results_variable: str) -> str:
    """The notebook's ``RESULTS`` as JSON, or ``{"__probe_error__": ...}`` saying why not."""

    def plain(o: Any) -> Any:
        if isinstance(o, np.generic) or (isinstance(o, np.ndarray) and o.ndim == 0):
            return o.item()
        raise TypeError("Object of type %s is not JSON serializable" % type(o).__name__)

    if results_variable not in ns:
        return json.dumps({"__probe_error__": "%s is not defined" % results_variable})
    try:
        reported = json.dumps(ns[results_variable], default=plain)
        if len(reported) > 1_000_000:
            raise ValueError("more than 1,000,000 characters of JSON")
        return reported
    except Exception as e:  # noqa: BLE001 - the student's value: whatever fails, the reason is recorded
        return json.dumps(
            {
                "__probe_error__": "%s is not plain JSON data: %s: %s"
                % (results_variable, type(e).__name__, str(e)[:300])
            }
        )


def setup(
    ns: dict,
    out_dir: str,
    functions: list,
    results_variable: str,
    case_timeout_s: float,
    max_bytes: int,
    limits: dict,
    file_name: str,
) -> dict:
    """Make the probe in the kernel whose user namespace is ``ns``: write which ``functions`` exist
    (``probe_report.json``) and ``RESULTS`` (``reported.json``); return ``{"call", "finish"}``."""
    probe = Probe(ns, out_dir, case_timeout_s, max_bytes, limits, file_name)
    report: dict = {"functions": {}, "origins": {}}
    for name in functions:
        report["functions"][name] = probe.status_of(name)
        if report["functions"][name] == "defined" and not name.startswith(GRADER_PREFIX):
            report["origins"][name] = probe.origin_of(name)
    reported = reported_json(ns, results_variable)
    write(out_dir, "reported.json", lambda f: f.write(reported.encode()))
    write(out_dir, "probe_report.json", lambda f: f.write(json.dumps(report).encode()))
    return {"call": probe.call, "finish": probe.finish}
