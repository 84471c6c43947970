"""The data contract between the grader and the probe that runs in the student's kernel.

The grader describes each call it wants as a :class:`ProbeCase`. The probe
(autograder/sandbox/probe.py) gets them one at a time, never from a file: each case is a cell
of its own whose source carries that case's arguments inline (:func:`inline_cases`), run only
after the previous call returned. So while the student's code runs, the kernel holds the
inputs of the calls made so far and nothing of the cases to come, and no path in the jail
holds hidden data (a file argument exists only during its own call, see below). The probe
decodes the arguments, calls ``function(*args, **kwargs)``, encodes the result (below) and
finally writes, into the working directory:

- ``probe_outputs.npz``: the NumPy values of the results: key ``c{i}`` when case i returned one
  NumPy value, else ``c{i}_{j}`` for its j-th NumPy value in the order of the result's encoding;
- ``probe_report.json``: ``{"cases": {case_id: {"status": ..., "value": <result encoding>,
  "parts": n, "python_type": ..., "error": {"type", "message", "traceback"}}}, "functions":
  {name: "defined"|"missing"|"not callable"}}`` with status one of ``ok``, ``raised``,
  ``unconvertible``, ``missing_function``, and ``"origins": {name: {"module", "qualname",
  "params"}}`` for each defined function, read before the first call (``"module": "__main__"``
  for a function of the notebook; another module means an import replaced it);
- ``reported.json``: the JSON of the notebook's results variable (``RESULTS``), or
  ``{"__probe_error__": "..."}`` when it is missing or not JSON-serialisable. It is written
  before the first call, and the grader takes its copy then (a function called with hidden
  inputs cannot change what the grader reads as RESULTS).

Argument encoding (JSON, inline in the case's cell): ``{"array": A}`` an ndarray, ``{"list": A}``
its ``.tolist()``, ``{"scalar": A}`` a NumPy scalar from a 0-d array (keeps its dtype, e.g.
``np.float32``), where ``A = {"dtype": "<f4", "shape": [4], "data": base64 of the C-order
bytes}``; ``{"float": v}``, ``{"int": v}``, ``{"bool": v}``, ``{"str": v}``, ``{"dtype": "int8"}``
the NumPy type object (``np.int8``), ``{"strings": [s, ...]}`` a list of str
(:meth:`Arg.strings`), and ``{"file": {"name": n, "data": base64}}`` (:meth:`Arg.file`): the
probe writes the bytes as ``n`` in a fresh private folder (mode 0700, under the kernel's
temporary directory, outside the working directory) made for that one call, passes the
function the file's path as a ``str``, and removes the folder as soon as the call returns,
before its record is written: no hidden file exists in the jail before its call or after it.
``{"artifact": relpath}`` (:meth:`Arg.artifact`): a file the notebook wrote under its working
directory (``"artifacts/profile.json"``); the grader refuses any path but a plain relative one
(:func:`artifact_path`), and the probe hands the function the file's real path as a ``str``, or
refuses the call with status ``bad_artifact`` when the file is missing, is not a regular file or
resolves outside the working directory (a link out): the record's ``error`` then holds a
``reason`` of :data:`ARTIFACT_REASONS` (the grader's words, which feedback may show) and the
``path``. ``{"session": {"path": <artifact or file>, "options": {...}}}`` (:meth:`Arg.session`):
the probe's own code opens ``onnxruntime.InferenceSession`` on that file (CPU) with those options
(``intra_op_num_threads``, ``inter_op_num_threads``, ``graph_optimization_level`` by name; the
jail's session rule applies, autograder/jail/jail_site.py) and hands the function the session; a
file that does not open is ``bad_artifact`` (``no_session``). A case whose ``function`` starts
with :data:`GRADER_PREFIX` (``"grader:latency_ms"``, ``"grader:latency_table"``:
:data:`GRADER_FUNCTIONS`) calls the probe's own function of that name, defined by the probe's
module in the kernel after the notebook's cells, never a name the notebook defines; a grader
call gets sessions the probe caches for the kernel's life, keyed by the file's bytes and the
options (autograder/sandbox/probe_kernel.py; autograder/measure/timing_honesty.py uses them).
One file is at most :data:`FILE_MAX_BYTES`, one case's cell at most :data:`CASE_MAX_BYTES` of
arguments (base64 grows bytes by 4/3).

Result encoding: a result may be any JSON-like value: ``None``, ``bool``, ``int`` (64-bit),
``float``, ``complex``, ``str``, a ``list`` or ``tuple``, a ``dict`` (a ``Counter`` or
``OrderedDict`` too) whose keys are ``str``, ``int``, ``float``, ``bool``, ``None`` or tuples of
them (NumPy integers, floats and bools as the Python ones), NumPy scalars and numeric ndarrays,
an ``onnxruntime.InferenceSession``, nested. Each node is ``{"none": null}``, ``{"bool": b}``,
``{"int": n}``, ``{"float": x}`` (JSON, with ``NaN`` and ``Infinity``), ``{"str": s}``,
``{"list": [node, …]}``, ``{"tuple": [node, …]}``, ``{"dict": [[key, node], …]}`` (in the dict's
order; a ``str`` key is itself, any other key a node of the kinds above, ``{"tuple": [key, …]}``
for a tuple), or a key into ``probe_outputs.npz``: ``{"array": k}`` (an ndarray), ``{"scalar":
k}`` (a NumPy scalar, a 0-d array there), ``{"complex": k}``. A session is described by the
probe's code with ONNX Runtime's own methods (a subclass's overrides are not called) as
``{"session": {"inputs": [[name, shape, type], …], "outputs": [name, …], "providers": […],
"node_count": n|null, "options": {"intra_op_num_threads", "inter_op_num_threads",
"execution_mode", "graph_optimization_level"}, "options_source": "requested"|"session"}}``, which
decodes to a :class:`SessionDescription`: the options as the NOTEBOOK asked for them (the jail's
record, made before it sets the pools left at 0), or the session's own where no jail recorded them.
Both sides hold it to :data:`RESULT_LIMITS` (nesting depth, leaves, bytes of strings, bytes of the
encoding); a result beyond them, or holding anything else (a set, bytes, an object, a key of
another type, a str or object ndarray), is ``unconvertible`` with the reason. Lone surrogates in
strings become U+FFFD. :func:`decode_result` rebuilds the value on the grader's side
(:attr:`CaseOutput.value`); ``values`` and ``is_tuple`` keep the array view lessons 03 and 07
read: one NumPy-convertible value, or a tuple or list of them, as arrays.

The grader trusts none of it beyond "this is what the student's function returned".
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import safe_files
from .errors import UnsafeFileError

OUTPUTS_FILE = "probe_outputs.npz"
REPORT_FILE = "probe_report.json"
REPORTED_FILE = "reported.json"

MiB = 1024 * 1024
FILE_MAX_BYTES = 8 * MiB  # one Arg.file
CASE_MAX_BYTES = 12 * MiB  # one case's arguments, as bytes before base64 (a cell decodes ~4 MiB/s)
STRINGS_MAX_ITEMS = 10_000  # one Arg.strings
STRINGS_MAX_BYTES = 1_000_000  # ... its strings together, UTF-8
FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")  # a plain file name: no separator, no dot first
MAX_SESSION_THREADS = 64  # an Arg.session's pool sizes (RLIMIT_NPROC counts threads)
OPTIMIZATION_LEVELS = (
    "ORT_DISABLE_ALL",
    "ORT_ENABLE_BASIC",
    "ORT_ENABLE_EXTENDED",
    "ORT_ENABLE_LAYOUT",
    "ORT_ENABLE_ALL",
)
GRADER_PREFIX = "grader:"  # a ProbeCase.function that names one of the probe's own functions, never the notebook's
GRADER_FUNCTIONS = ("grader:latency_ms", "grader:latency_table")  # (autograder/sandbox/probe_kernel.py)
# why the probe refused an Arg.artifact or Arg.session (status bad_artifact), in the grader's words
ARTIFACT_REASONS = {
    "missing": "the notebook did not write it",
    "not_a_file": "it is not a regular file",
    "outside": "it leads outside the working directory",
    "no_session": "ONNX Runtime could not open it as a session",
}


@dataclass(frozen=True)
class ResultLimits:
    """How large one call's result may be (see the module docstring)."""

    depth: int = 8  # containers nested in containers
    leaves: int = 10_000  # values that are not containers (an ndarray is one)
    string_bytes: int = 1_000_000  # UTF-8 bytes of all strings and keys together
    encoded_bytes: int = 2 * MiB  # the result's encoding as JSON (strings escaped)


RESULT_LIMITS = ResultLimits()
# the bound a result broke, as the probe names it ("limit" in its error), in the grader's words
LIMIT_WORDS = {
    "depth": f"nested more than {RESULT_LIMITS.depth} deep",
    "leaves": f"more than {RESULT_LIMITS.leaves:,} values",
    "strings": f"more than {RESULT_LIMITS.string_bytes:,} bytes of strings",
    "encoded": f"its JSON encoding is more than {RESULT_LIMITS.encoded_bytes:,} bytes",
    "int": "an int beyond 64 bits",
    "total": "all results of the probe together are too large",
}
INT_MIN, INT_MAX = -(2**63), 2**64 - 1  # what NumPy holds as int64 or uint64


class ResultError(ValueError):
    """A result beyond :data:`RESULT_LIMITS` or holding a value that is not JSON-like."""


@dataclass(frozen=True)
class Arg:
    """One argument: a value (float/int/bool/str), an array (as array, list or scalar), a dtype, a
    list of strings, a file, one of the notebook's own files (an artifact) or a session the probe
    opens on a file."""

    kind: str  # array | list | scalar | float | int | bool | str | dtype | strings | file | artifact | session
    value: Any

    @staticmethod
    def array(a) -> "Arg":
        return Arg("array", np.asarray(a))

    @staticmethod
    def list(a) -> "Arg":
        return Arg("list", np.asarray(a))

    @staticmethod
    def scalar(a) -> "Arg":
        return Arg("scalar", np.asarray(a))

    @staticmethod
    def dtype(name: str) -> "Arg":
        return Arg("dtype", str(np.dtype(name)))

    @staticmethod
    def strings(items) -> "Arg":
        """A list of ``str`` (the function gets a ``list``), at most :data:`STRINGS_MAX_ITEMS` and
        :data:`STRINGS_MAX_BYTES`."""
        items = tuple(items)
        if not all(type(x) is str for x in items):
            raise TypeError("Arg.strings takes str items only")
        if (
            len(items) > STRINGS_MAX_ITEMS
            or sum(len(x.encode("utf-8", "surrogatepass")) for x in items) > STRINGS_MAX_BYTES
        ):
            raise ValueError(
                f"Arg.strings holds at most {STRINGS_MAX_ITEMS} strings of {STRINGS_MAX_BYTES} bytes in all"
            )
        return Arg("strings", items)

    @staticmethod
    def file(data: bytes, name: str) -> "Arg":
        """A file ``name`` holding ``data``; the function gets its path (a ``str``), valid during that
        call only (see the module docstring). ``name``: a plain file name (letters, digits, ``._-``,
        not starting with a dot, at most 100 characters)."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("Arg.file takes the file's bytes")
        if not isinstance(name, str) or not FILE_NAME.fullmatch(name):
            raise ValueError(f"Arg.file needs a plain file name (letters, digits, '._-', no dot first), not {name!r}")
        data = bytes(data)
        if len(data) > FILE_MAX_BYTES:
            raise ValueError(f"Arg.file holds at most {FILE_MAX_BYTES} bytes, not {len(data)}")
        return Arg("file", (name, data))

    @staticmethod
    def artifact(relpath: str) -> "Arg":
        """A file the notebook wrote under its working directory, e.g. ``"artifacts/profile.json"``;
        the function gets its path (a ``str``). ``relpath``: :func:`artifact_path`'s rule. The probe
        refuses the call (status ``bad_artifact``) when the file is missing, is not a regular file
        or resolves outside the working directory (:data:`ARTIFACT_REASONS`)."""
        return Arg("artifact", artifact_path(relpath))

    @staticmethod
    def session(
        path_arg: "Arg",
        intra_op_num_threads: int | None = None,
        inter_op_num_threads: int | None = None,
        graph_optimization_level: str | None = None,
    ) -> "Arg":
        """An ``onnxruntime.InferenceSession`` that the probe's own code opens in the kernel (CPU, the
        jail's session rule applies) on ``path_arg`` (an :meth:`artifact` or a :meth:`file`), with
        these options (None: ONNX Runtime's default; a level by name, e.g. ``"ORT_ENABLE_BASIC"``);
        the function gets the session. A file that does not open is ``bad_artifact`` (``no_session``)."""
        if not isinstance(path_arg, Arg) or path_arg.kind not in ("artifact", "file"):
            raise TypeError("Arg.session opens an Arg.artifact or an Arg.file")
        options: dict[str, Any] = {}
        for key, n in (("intra_op_num_threads", intra_op_num_threads), ("inter_op_num_threads", inter_op_num_threads)):
            if n is not None:
                if type(n) is not int or not 0 <= n <= MAX_SESSION_THREADS:
                    raise ValueError(f"Arg.session: {key} is an int from 0 to {MAX_SESSION_THREADS}, not {n!r}")
                options[key] = n
        if graph_optimization_level is not None:
            if graph_optimization_level not in OPTIMIZATION_LEVELS:
                raise ValueError(
                    f"Arg.session: graph_optimization_level is one of {', '.join(OPTIMIZATION_LEVELS)}, "
                    f"not {graph_optimization_level!r}"
                )
            options["graph_optimization_level"] = graph_optimization_level
        return Arg("session", (path_arg, options))


def artifact_path(relpath: Any) -> str:
    """``relpath`` unchanged when it is a plain relative path: a non-empty ``str`` of at most 255
    characters, ``/``-separated names, none empty, ``.`` or ``..``, no backslash, no NUL, not
    absolute; else ValueError saying why (the grader's side of :meth:`Arg.artifact`)."""
    if not isinstance(relpath, str) or not relpath:
        raise ValueError(f"an artifact is named by a non-empty relative path, not {relpath!r}")
    if len(relpath) > 255 or "\\" in relpath or "\0" in relpath:
        raise ValueError(f"an artifact's path is at most 255 characters, without backslash or NUL: {relpath!r}")
    if relpath.startswith("/"):
        raise ValueError(f"an artifact's path is relative to the working directory, not absolute: {relpath!r}")
    if any(part in ("", ".", "..") for part in relpath.split("/")):
        raise ValueError(f"an artifact's path holds no empty, '.' or '..' part: {relpath!r}")
    return relpath


@dataclass(frozen=True)
class ProbeCase:
    """One call of a student function: ``function(*args, **kwargs)``.

    ``group`` names the property the case tests ("ties", "saturation", ...) for feedback.
    """

    id: str
    function: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    group: str = ""

    def raw(self, name_or_index):
        """The plain Python/NumPy value of an argument (for computing the reference answer); a
        file argument gives its bytes."""
        a = self.kwargs[name_or_index] if isinstance(name_or_index, str) else self.args[name_or_index]
        return decode_value(a)


def decode_value(a: Any) -> Any:
    if not isinstance(a, Arg):
        return a
    if a.kind == "array":
        return a.value
    if a.kind == "list":
        return a.value.tolist()
    if a.kind == "scalar":
        return a.value[()]
    if a.kind == "dtype":
        return np.dtype(a.value).type
    if a.kind == "strings":
        return list(a.value)
    if a.kind == "file":
        return a.value[1]
    if a.kind == "session":  # what it opens: the file's bytes, or the artifact's path
        return decode_value(a.value[0])
    return a.value


def _plain(a: Any, arrays: dict[str, np.ndarray]) -> dict:
    if not isinstance(a, Arg):
        if isinstance(a, bool):
            a = Arg("bool", a)
        elif isinstance(a, int):
            a = Arg("int", a)
        elif isinstance(a, float):
            a = Arg("float", a)
        elif isinstance(a, str):
            a = Arg("str", a)
        else:
            raise TypeError(f"cannot encode probe argument {a!r}")
    if a.kind in ("array", "list", "scalar"):
        key = f"a{len(arrays)}"
        arrays[key] = np.asarray(a.value)
        return {a.kind: key}
    if a.kind == "float":
        return {"float": float(a.value)}
    if a.kind == "int":
        return {"int": int(a.value)}
    if a.kind == "bool":
        return {"bool": bool(a.value)}
    if a.kind == "str":
        return {"str": str(a.value)}
    if a.kind == "dtype":
        return {"dtype": str(a.value)}
    if a.kind == "strings":
        return {"strings": list(a.value)}
    if a.kind == "file":
        name, data = a.value
        return {"file": {"name": name, "data": base64.b64encode(data).decode()}}
    if a.kind == "artifact":
        return {"artifact": artifact_path(a.value)}
    if a.kind == "session":
        path_arg, options = a.value
        return {"session": {"path": _plain(path_arg, arrays), "options": dict(options)}}
    raise TypeError(f"unknown probe argument kind {a.kind!r}")


def _file_args(c: ProbeCase) -> list[Arg]:
    """A case's arguments, each session's file in place of the session."""
    return [a.value[0] if isinstance(a, Arg) and a.kind == "session" else a for a in (*c.args, *c.kwargs.values())]


def case_bytes(c: ProbeCase) -> int:
    """The bytes of a case's array and file arguments (what its cell carries, before base64)."""
    size = 0
    for a in _file_args(c):
        if isinstance(a, Arg) and a.kind == "file":
            size += len(a.value[1])
        elif isinstance(a, Arg) and a.kind in ("array", "list", "scalar"):
            size += np.asarray(a.value).nbytes
    return size


def check_cases(cases: list[ProbeCase]) -> None:
    """ValueError when the probe cannot send these cases: ids repeat, a case's arguments hold more
    than :data:`CASE_MAX_BYTES`, two file arguments of one call share a name, or a function named
    with :data:`GRADER_PREFIX` is none of :data:`GRADER_FUNCTIONS`."""
    ids = [c.id for c in cases]
    if len(set(ids)) != len(ids):
        raise ValueError("probe case ids must be unique")
    for c in cases:
        if c.function.startswith(GRADER_PREFIX) and c.function not in GRADER_FUNCTIONS:
            raise ValueError(f"probe case {c.id!r}: the probe has no function {c.function!r}")
        if case_bytes(c) > CASE_MAX_BYTES:
            raise ValueError(f"probe case {c.id!r}: its arguments hold more than {CASE_MAX_BYTES:,} bytes")
        names = [a.value[0] for a in _file_args(c) if isinstance(a, Arg) and a.kind == "file"]
        if len(set(names)) != len(names):
            raise ValueError(f"probe case {c.id!r}: two file arguments are named alike")


def encode_cases(cases: list[ProbeCase]) -> tuple[list[dict], dict[str, np.ndarray]]:
    """``(plain cases, arrays)``: each case as JSON-able data whose arrays are keys into ``arrays``
    (ValueError: :func:`check_cases`)."""
    check_cases(cases)
    arrays: dict[str, np.ndarray] = {}
    plain = []
    for i, c in enumerate(cases):
        plain.append(
            {
                "index": i,
                "id": c.id,
                "function": c.function,
                "args": [_plain(a, arrays) for a in c.args],
                "kwargs": {k: _plain(v, arrays) for k, v in c.kwargs.items()},
            }
        )
    return plain, arrays


def _inline(value: dict, arrays: dict[str, np.ndarray]) -> dict:
    ((kind, v),) = value.items()
    if kind == "session":
        return {"session": {"path": _inline(v["path"], arrays), "options": v["options"]}}
    if kind not in ("array", "list", "scalar"):
        return value
    a = np.asarray(arrays[v])  # not ascontiguousarray: that makes a 0-d array 1-d
    if a.dtype.kind not in "biufc":
        raise TypeError(f"probe arrays must be numeric, not {a.dtype}")
    return {kind: {"dtype": a.dtype.str, "shape": list(a.shape), "data": base64.b64encode(a.tobytes()).decode()}}


def inline_cases(cases: list[ProbeCase]) -> list[dict]:
    """Each case as one self-contained JSON-able dict, its arrays inline (see the module docstring)."""
    plain, arrays = encode_cases(cases)
    for case in plain:
        case["args"] = [_inline(a, arrays) for a in case["args"]]
        case["kwargs"] = {k: _inline(v, arrays) for k, v in case["kwargs"].items()}
    return plain


# ---------------------------------------------------------------- results


def _number_leaf(v: Any) -> bool:
    """A value the array view (``CaseOutput.values``) holds as one array."""
    if isinstance(v, np.ndarray) or isinstance(v, np.generic):
        return np.asarray(v).dtype.kind in "biufc"
    return isinstance(v, (bool, int, float, complex))


def array_view(value: Any) -> tuple[list[np.ndarray], bool] | None:
    """``(values, is_tuple)`` as lessons 03 and 07 read a result: one number or array, or a tuple or
    list of them (each as an array); None for any other value (a dict, a str, nested lists)."""
    if isinstance(value, (list, tuple)):
        if all(_number_leaf(v) for v in value):
            return [np.asarray(v) for v in value], True
        return None
    if _number_leaf(value):
        return [np.asarray(value)], False
    return None


def decode_result(node: Any, arrays: dict[str, np.ndarray], index: int, limits: ResultLimits = RESULT_LIMITS) -> Any:
    """Case ``index``'s result from its encoding and its NumPy values (keys ``c{index}`` and
    ``c{index}_{j}`` of ``arrays``). ResultError when the encoding is malformed, refers to another
    case's arrays or exceeds ``limits``: the grader checks what the probe already checked."""
    own = f"c{index}"
    counts = {"leaves": 0, "strings": 0}

    def string(s: Any) -> str:
        if not isinstance(s, str):
            raise ResultError("a string that is not a str")
        counts["strings"] += len(s.encode("utf-8", "surrogatepass"))
        if counts["strings"] > limits.string_bytes:
            raise ResultError(f"more than {limits.string_bytes:,} bytes of strings")
        return s

    def array(key: Any) -> np.ndarray:
        if not isinstance(key, str) or not (key == own or key.startswith(own + "_") and key[len(own) + 1 :].isdigit()):
            raise ResultError("a NumPy value that is not this call's")
        if key not in arrays:
            raise ResultError("a NumPy value is missing")
        a = arrays[key]
        if a.dtype.kind not in "biufc":
            raise ResultError(f"an array of dtype {a.dtype}")
        return a

    def dict_key(k: Any, depth: int) -> Any:
        if isinstance(k, str):  # a str key as itself, as before keys could be anything else
            return string(k)
        if not isinstance(k, dict) or len(k) != 1:
            raise ResultError("a malformed dict key")
        ((kind, v),) = k.items()
        if kind == "tuple":
            if depth >= limits.depth:
                raise ResultError(f"nested more than {limits.depth} deep")
            if not isinstance(v, list):
                raise ResultError("a malformed dict key")
            return tuple(dict_key(x, depth + 1) for x in v)
        if kind not in KEY_KINDS:
            raise ResultError("a dict key that is not a str, int, float, bool, None or a tuple of them")
        return walk(k, depth)

    def walk(n: Any, depth: int) -> Any:
        if not isinstance(n, dict) or len(n) != 1:
            raise ResultError("a malformed result encoding")
        ((kind, v),) = n.items()
        if kind == "session":
            counts["leaves"] += 1
            return session_description(v, string)
        if kind in ("list", "tuple", "dict"):
            if depth >= limits.depth:
                raise ResultError(f"nested more than {limits.depth} deep")
            if not isinstance(v, list):
                raise ResultError("a malformed result encoding")
            if kind == "dict":
                out = {}
                for pair in v:
                    if not (isinstance(pair, list) and len(pair) == 2):
                        raise ResultError("a malformed result encoding")
                    k = dict_key(pair[0], depth + 1)
                    if k in out:
                        raise ResultError("a dict key given twice")
                    out[k] = walk(pair[1], depth + 1)
                return out
            items = [walk(x, depth + 1) for x in v]
            return items if kind == "list" else tuple(items)
        counts["leaves"] += 1
        if counts["leaves"] > limits.leaves:
            raise ResultError(f"more than {limits.leaves:,} values")
        if kind == "none" and v is None:
            return None
        if kind == "bool" and isinstance(v, bool):
            return v
        if kind == "int" and isinstance(v, int) and not isinstance(v, bool):
            if not INT_MIN <= v <= INT_MAX:
                raise ResultError("an int beyond 64 bits")
            return v
        if kind == "float" and isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
        if kind == "str":
            return string(v)
        if kind == "array":
            return array(v)
        if kind == "scalar":
            a = array(v)
            if a.ndim != 0:
                raise ResultError("a NumPy scalar that is not 0-d")
            return a[()]
        if kind == "complex":
            a = array(v)
            if a.ndim != 0 or a.dtype.kind != "c":
                raise ResultError("a complex that is not one")
            return complex(a[()])
        raise ResultError("a malformed result encoding")

    return walk(node, 0)


KEY_KINDS = ("none", "bool", "int", "float", "str")  # a dict key's leaves (tuples of them too)


@dataclass(frozen=True)
class SessionInput:
    """One input of a described session: its name, shape (an int, a symbolic name or None per
    dimension) and ONNX Runtime's type text (``"tensor(float)"``)."""

    name: str
    shape: tuple[int | str | None, ...]
    type: str


@dataclass(frozen=True)
class SessionDescription:
    """An ``onnxruntime.InferenceSession`` a student's function returned, as the probe's own code
    described it in the kernel (``{"session": {...}}``, see the module docstring).

    The options are those the NOTEBOOK asked for (``options_source == "requested"``: the jail's
    record, before it set the pools left at 0; 0 means ONNX Runtime's default) or, where no jail
    recorded them, those the session holds (``"session"``). ``node_count``: the nodes of the
    top-level graph of the file the session was opened from (None when not cheap to read:
    no ``onnx`` in the kernel, a session opened from bytes, a file over 64 MB)."""

    inputs: tuple[SessionInput, ...]
    output_names: tuple[str, ...]
    providers: tuple[str, ...]
    node_count: int | None
    intra_op_num_threads: int | None
    inter_op_num_threads: int | None
    execution_mode: str | None
    graph_optimization_level: str | None
    options_source: str  # requested | session

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.inputs)


def session_description(v: Any, string: Any = str) -> SessionDescription:
    """A ``{"session": v}`` node's :class:`SessionDescription` (ResultError when malformed);
    ``string`` checks and counts each str."""

    def text(x: Any) -> str:
        if not isinstance(x, str):
            raise ResultError("a malformed session description")
        return string(x)

    def count(x: Any) -> int | None:
        if x is None:
            return None
        if type(x) is not int or not 0 <= x <= INT_MAX:
            raise ResultError("a malformed session description")
        return x

    def optional_text(x: Any) -> str | None:
        return None if x is None else text(x)

    def dim(x: Any) -> int | str | None:
        return x if x is None or type(x) is int else text(x)

    try:
        if not isinstance(v, dict) or not isinstance(v.get("options"), dict):
            raise ResultError("a malformed session description")
        if not all(isinstance(v.get(k), list) for k in ("inputs", "outputs", "providers")):
            raise ResultError("a malformed session description")
        options = v["options"]
        inputs = tuple(
            SessionInput(text(i[0]), tuple(dim(d) for d in i[1]), text(i[2]))
            for i in v["inputs"][:1000]
            if isinstance(i, list) and len(i) == 3 and isinstance(i[1], list)
        )
        if len(inputs) != len(v["inputs"]) or v.get("options_source") not in ("requested", "session"):
            raise ResultError("a malformed session description")
        return SessionDescription(
            inputs,
            tuple(text(o) for o in v["outputs"][:1000]),
            tuple(text(p) for p in v["providers"][:100]),
            count(v.get("node_count")),
            count(options.get("intra_op_num_threads")),
            count(options.get("inter_op_num_threads")),
            optional_text(options.get("execution_mode")),
            optional_text(options.get("graph_optimization_level")),
            v["options_source"],
        )
    except (KeyError, TypeError) as e:
        raise ResultError("a malformed session description") from e


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass
class CaseOutput:
    """What the probe recorded for one case: its result, or why there is none.

    ``value``: the result as the function returned it (:func:`decode_result`: dicts, lists,
    tuples, str, bool, None, int, float, NumPy scalars and arrays). ``values``/``is_tuple``: its
    array view (:func:`array_view`; ``[]`` for a result that has none, e.g. a dict).
    """

    status: str  # ok | raised | unconvertible | missing_function | not_run
    values: list[np.ndarray] = field(default_factory=list)
    is_tuple: bool = False
    error: dict | None = None
    value: Any = UNSET

    def result(self) -> Any:
        """The returned value; for an output built from arrays only, the array view as a value."""
        if self.value is not UNSET:
            return self.value
        if self.is_tuple or len(self.values) != 1:
            return tuple(self.values)
        return self.values[0]


@dataclass
class ProbeResult:
    """The probe's data, read safely after the kernel is gone."""

    ran: bool
    error: str | None
    cases: dict[str, CaseOutput]
    functions: dict[str, str]
    reported: Any | None
    reported_error: str | None
    origins: dict[str, dict] = field(default_factory=dict)  # function → {"module", "qualname", "params"}


REPORT_MAX_BYTES = 24 * MiB  # probe_report.json (the probe keeps its results' encodings to 16 MiB in all)
OUTPUTS_MAX_ENTRIES = 100_000  # arrays in probe_outputs.npz


def _ok_output(i: int, rec: dict, arrays: dict[str, np.ndarray]) -> CaseOutput:
    if "value" in rec:
        try:
            value = decode_result(rec["value"], arrays, i)
        except (ResultError, RecursionError) as e:
            return CaseOutput("unconvertible", error={"type": "ProbeError", "message": f"result unusable: {e}"})
        values, is_tuple = array_view(value) or ([], False)
        return CaseOutput("ok", values, is_tuple, value=value)
    if f"c{i}" in arrays:  # a record from before results carried their encoding
        return CaseOutput("ok", [arrays[f"c{i}"]])
    vals, j = [], 0
    while f"c{i}_{j}" in arrays:
        vals.append(arrays[f"c{i}_{j}"])
        j += 1
    return (
        CaseOutput("ok", vals, is_tuple=True)
        if vals or rec.get("parts") == 0
        else CaseOutput("unconvertible", error={"type": "ProbeError", "message": "result missing"})
    )


def read_probe_result(workspace: Path, cases: list[ProbeCase], probe_completed: bool) -> ProbeResult:
    """Read the probe's files from ``workspace``; anything missing or malformed becomes a reason."""
    not_run = {c.id: CaseOutput("not_run") for c in cases}
    if not probe_completed:
        return ProbeResult(
            False,
            "the probe did not run to completion (the notebook did not finish)",
            not_run,
            {},
            None,
            "the probe did not run",
        )
    try:
        report = safe_files.load_json(workspace, REPORT_FILE, REPORT_MAX_BYTES)
        arrays = safe_files.load_npz(workspace, OUTPUTS_FILE, max_entries=OUTPUTS_MAX_ENTRIES)
        if not isinstance(report, dict) or not isinstance(report.get("cases"), dict):
            raise UnsafeFileError(f"{REPORT_FILE} does not have the probe's shape")
    except UnsafeFileError as e:
        return ProbeResult(False, str(e), not_run, {}, None, str(e))
    out: dict[str, CaseOutput] = {}
    for i, c in enumerate(cases):
        rec = report["cases"].get(c.id)
        if not isinstance(rec, dict):
            out[c.id] = CaseOutput("not_run")
            continue
        status = str(rec.get("status", "not_run"))
        err = rec.get("error") if isinstance(rec.get("error"), dict) else None
        out[c.id] = _ok_output(i, rec, arrays) if status == "ok" else CaseOutput(status, error=err)
    functions = report.get("functions") if isinstance(report.get("functions"), dict) else {}
    reported, reported_error = None, None
    try:
        reported = safe_files.load_json(workspace, REPORTED_FILE)
        if isinstance(reported, dict) and "__probe_error__" in reported:
            reported_error, reported = str(reported["__probe_error__"])[:500], None
    except UnsafeFileError as e:
        reported_error = str(e)
    origins = report.get("origins") if isinstance(report.get("origins"), dict) else {}
    return ProbeResult(
        True,
        None,
        out,
        {str(k): str(v) for k, v in (functions or {}).items()},
        reported,
        reported_error,
        {str(k): v for k, v in (origins or {}).items() if isinstance(v, dict)},
    )
