"""What a student reads when ONNX Runtime could not run their model on the grader's rows.

ONNX Runtime's run-time errors quote the values that broke the run: a ``Gather`` whose index is
computed from the input (``1e6·x + 5e7``) fails with ``idx=50318600 must be within the inclusive
range``, which is a hidden input to six digits. So the measuring child never passes such a message
on: :func:`run_failure` turns the exception into a fixed sentence built only from ONNX Runtime's
status code, a category read from the message by fixed patterns, and the failing node's operator
type when it is a known ONNX operator:

    ONNX Runtime could not run it on the grader's rows: a `Gather` index out of range (INVALID_ARGUMENT)

Nothing of the message itself (numbers, shapes, node names, values) survives. Imports only
:mod:`autograder.student_text` and, for the list of operators, :mod:`.onnx_load`.
"""

from __future__ import annotations

import re

from ..student_text import mask

PREFIX = "ONNX Runtime could not run it on the grader's rows"
# ORT's StatusCode (onnxruntime/core/common/status.h); the message starts "[ONNXRuntimeError] : <code> : <NAME> :"
STATUS_NAMES = {
    1: "FAIL",
    2: "INVALID_ARGUMENT",
    3: "NO_SUCHFILE",
    4: "NO_MODEL",
    5: "ENGINE_ERROR",
    6: "RUNTIME_EXCEPTION",
    7: "INVALID_PROTOBUF",
    8: "MODEL_LOADED",
    9: "NOT_IMPLEMENTED",
    10: "INVALID_GRAPH",
    11: "EP_FAIL",
    12: "MODEL_LOAD_CANCELED",
    13: "MODEL_REQUIRES_COMPILATION",
    14: "NOT_FOUND",
}
# (pattern in the lowercased message, the category's fixed words); the first match wins
CATEGORIES = (
    (
        re.compile(
            r"out of (?:data )?bounds|out of range|inclusive range|invalid ind(?:ex|ices)|index .* (?:exceeds|outside)"
        ),
        "index out of range",
    ),
    (re.compile(r"divi(?:de|sion) by zero"), "division by zero"),
    (re.compile(r"bad_alloc|allocat|out of memory"), "memory allocation failure"),
    (re.compile(r"data type|type mismatch|unexpected input type|tensor\(\w+\)"), "type mismatch"),
    (re.compile(r"shape|broadcast|dimension|rank|dims|reshape"), "shape mismatch"),
    (re.compile(r"not implemented|not supported|unsupported"), "unsupported case"),
)
_STATUS = re.compile(r"\[ONNXRuntimeError\]\s*:\s*(\d{1,3})\s*:")
_NODE = re.compile(r"while running (\w{1,64}) node")
_PYTHON_ERRORS = frozenset(
    {
        "MemoryError",
        "ValueError",
        "TypeError",
        "RuntimeError",
        "IndexError",
        "OverflowError",
        "ZeroDivisionError",
        "KeyError",
        "SystemError",
    }
)


def known_operator(op: str) -> bool:
    """Whether ``op`` is an operator type ONNX or ONNX Runtime's quantization defines (so a
    node name or anything else planted in the message is never echoed as one)."""
    from .model_check import MICROSOFT_OPS

    if op in MICROSOFT_OPS:
        return True
    try:
        import onnx.defs

        return any(onnx.defs.has(op, domain) for domain in ("", "ai.onnx.ml"))
    except Exception:  # noqa: BLE001 - onnx unavailable: name no operator
        return False


def category(message: str) -> str | None:
    """The fixed words for what went wrong, from fixed patterns of the message (None: none matched)."""
    low = message.lower()
    return next((words for pattern, words in CATEGORIES if pattern.search(low)), None)


def describe(exc: BaseException) -> str:
    """What went wrong, in fixed words: ``a `Gather` index out of range (INVALID_ARGUMENT)``."""
    message = " ".join(str(exc).split())[:4000]
    code = _STATUS.search(message)
    status = STATUS_NAMES.get(int(code.group(1))) if code else None
    node = _NODE.search(message)
    op = node.group(1) if node and known_operator(node.group(1)) else None
    what = category(message)
    if what is None:
        what = "error" if status or op else None
    if what is None:
        name = type(exc).__name__
        return f"a Python {name}" if name in _PYTHON_ERRORS else "an error"
    head = f"a `{op}` {what}" if op else f"an {what}" if what[0] in "aeiou" else f"a {what}"
    return f"{head} ({status})" if status else head


def run_failure(exc: BaseException) -> str:
    """The sentence a student reads for a model that ONNX Runtime could not run on the grader's rows.
    Masked once more (:func:`autograder.student_text.mask`): nothing in it can carry a value."""
    return mask(f"{PREFIX}: {describe(exc)}")


def timing_failure(exc: BaseException) -> str:
    """The sentence for a model that failed while its latency was timed (on public rows)."""
    return mask(f"ONNX Runtime could not time it: {describe(exc)}")
