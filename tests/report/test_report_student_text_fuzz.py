"""Property tests of the one way out for student-visible text (``autograder/student_text.py``).

Hypothesis generates hostile text in every Unicode general category for each channel a notebook
controls (an exception's type and message from a probed call, ONNX Runtime's error string from
the measuring child, ``RESULTS`` keys and values, file names), with a hidden float32 array
encoded into it in several ways: decimal, hex and base64 of its bytes, one character per byte in
a dozen scripts (CJK, Hangul, Cyrillic, Arabic, private use, emoji, combining marks, …), and its
integer bits in the digits of other scripts (Arabic-Indic, Devanagari, Thai, fullwidth,
mathematical, …). Each text goes through the function the grader really uses on that channel, and
the invariants are asserted:

- no rendering of a hidden value can be read back from text made while hidden data was in reach
  (:func:`mask`, the probe's exception words, the fixed sentence of a failed ONNX run);
- every output is valid UTF-8, on one line, free of control/format/bidi characters, bounded;
- a masked output is printable ASCII (besides the masks), with no digit of any script outside a
  dtype name, no word longer than ``MAX_WORD`` and no symbol run longer than ``MAX_SYMBOLS``;
- a failed ONNX run is one of the fixed sentences, naming only a known operator.

What mask() leaves on purpose is ASCII words: an encoding into letters only (a word of at most
``MAX_WORD`` letters, e.g. base64 that happens to hold no digit) is that channel, whose capacity
SECURITY.md states; such renderings are not counted as leaks here, every other one is.

Bounded: ``AUTOGRADER_FUZZ_EXAMPLES`` examples per property (default 100: about 10 s of CPU for the
file); set it higher for a long run (CONTRIBUTING.md).
"""

from __future__ import annotations

import base64
import json
import os
import re
import unicodedata

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autograder import student_text
from autograder.measure import failure, onnx_errors
from autograder.measure.model_worker import RUN_ERROR_CHARS
from autograder.probe_format import CaseOutput
from autograder.report import escape
from autograder.student_text import CUT, DTYPE_NAMES, MASK, MAX_SYMBOLS, MAX_WORD, clean, mask

EXAMPLES = int(os.environ.get("AUTOGRADER_FUZZ_EXAMPLES", "100"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

CATEGORIES = (
    "Lu",
    "Ll",
    "Lt",
    "Lm",
    "Lo",
    "Mn",
    "Mc",
    "Me",
    "Nd",
    "Nl",
    "No",
    "Pc",
    "Pd",
    "Ps",
    "Pe",
    "Pi",
    "Pf",
    "Po",
    "Sm",
    "Sc",
    "Sk",
    "So",
    "Zs",
    "Zl",
    "Zp",
    "Cc",
    "Cf",
    "Cs",
    "Co",
    "Cn",
)
# one character per byte: base + byte stays inside the block (no surrogates)
BYTE_SCRIPTS = {
    "CJK": 0x4E00,
    "Hangul": 0xAC00,
    "Cyrillic": 0x0400,
    "Greek and Coptic": 0x0370,
    "Arabic": 0x0600,
    "Devanagari and Bengali": 0x0900,
    "Latin extended": 0x0100,
    "private use": 0xE000,
    "emoji": 0x1F300,
    "combining marks, then Greek": 0x0300,
    "mathematical letters": 0x1D400,
    "Cherokee and Canadian syllabics": 0x13A0,
}
# decimal digits of other scripts (their zero)
DIGIT_SCRIPTS = {
    "ASCII": 0x30,
    "Arabic-Indic": 0x0660,
    "Extended Arabic-Indic": 0x06F0,
    "Devanagari": 0x0966,
    "Bengali": 0x09E6,
    "Thai": 0x0E50,
    "Myanmar": 0x1040,
    "fullwidth": 0xFF10,
    "mathematical bold": 0x1D7CE,
    "superscript": None,
}
SUPERSCRIPT = "⁰¹²³⁴⁵⁶⁷⁸⁹"
CONTROL_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Cs"}


# ── strategies ────────────────────────────────────────────────────────────────────────────────


def _category_run(category: str):
    return st.text(st.characters(categories=[category]), min_size=1, max_size=8)


hostile = st.lists(st.sampled_from(CATEGORIES).flatmap(_category_run), max_size=12).map("".join)
hidden_arrays = st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=1, max_size=6).map(
    lambda v: np.array(v, dtype=np.float32)
)


def _digits(n: int, script: str) -> str:
    if script == "superscript":
        return "".join(SUPERSCRIPT[int(d)] for d in str(n))
    zero = DIGIT_SCRIPTS[script]
    return "".join(chr(zero + int(d)) for d in str(n))


def encodings(a: np.ndarray) -> dict[str, str]:
    """Every way the tests hide ``a`` in a text (what an attacker would write)."""
    raw = a.tobytes()
    out = {
        "repr": " ".join(repr(float(v)) for v in a),
        "9 digits": ",".join(f"{float(v):.9g}" for v in a),
        "exponent": " ".join(f"{float(v):e}" for v in a),
        "list": json.dumps(a.tolist()),
        "hex": raw.hex(),
        "base64": base64.b64encode(raw).decode(),
    }
    for script, base in BYTE_SCRIPTS.items():
        out[f"one {script} character per byte"] = "".join(chr(base + b) for b in raw)
    for script in DIGIT_SCRIPTS:
        out[f"{script} digits of the bits"] = " ".join(_digits(int(u), script) for u in a.view(np.uint32))
    return out


def needles(a: np.ndarray) -> dict[str, str]:
    """Renderings of ``a`` that must not be readable in a masked text: per value and whole."""
    out = dict(encodings(a))
    for i, v in enumerate(a):
        out[f"value {i} repr"] = repr(float(v))
        out[f"value {i} .6g"] = f"{float(v):.6g}"
        b = np.float32(v).tobytes()
        out[f"value {i} hex"] = b.hex()
        for script, base in BYTE_SCRIPTS.items():
            out[f"value {i} in {script}"] = "".join(chr(base + x) for x in b)
        out[f"value {i} Arabic-Indic digits"] = _digits(int(np.float32(v).view(np.uint32)), "Arabic-Indic")
    return out


def _words_channel(needle: str) -> bool:
    """A rendering mask() keeps by design: printable ASCII with no digit and no run longer than a
    word (SECURITY.md: the capacity of that channel is bounded, not zero)."""
    return (
        needle.isascii()
        and not any(ch.isdigit() for ch in needle)
        and all(len(w) <= MAX_WORD for w in re.findall(r"\w+", needle))
    )


def _embedded(draw, a: np.ndarray) -> tuple[str, str]:
    how = draw(st.sampled_from(sorted(encodings(a))))
    return how, draw(hostile) + " " + encodings(a)[how] + " " + draw(hostile)


# ── invariants ────────────────────────────────────────────────────────────────────────────────


def assert_one_clean_line(out: str, limit: int) -> None:
    out.encode("utf-8")  # valid UTF-8: no lone surrogate
    assert len(out) <= limit, (len(out), limit)
    bad = {unicodedata.category(ch) for ch in out} & CONTROL_CATEGORIES
    assert not bad and "\n" not in out, (bad, out)
    assert out == " ".join(out.split()), "whitespace is one space, none at the ends"


def assert_masked(out: str, limit: int) -> None:
    assert_one_clean_line(out, limit)
    plain = out.replace(CUT, " ").replace(MASK, " ").removesuffix(student_text.TRUNCATED)
    assert plain.isascii() and (plain.isprintable() or not plain), f"not printable ASCII: {plain!r}"
    for word in re.findall(r"\w+", plain):
        assert len(word) <= MAX_WORD, word
        assert word.lower() in DTYPE_NAMES or not any(ch.isnumeric() for ch in word), word
    for run in re.findall(r"[^\w\s]+", plain):
        assert len(run) <= MAX_SYMBOLS, run


def assert_no_hidden_value(out: str, a: np.ndarray) -> None:
    readable = [
        what for what, needle in needles(a).items() if len(needle) >= 3 and not _words_channel(needle) and needle in out
    ]
    assert not readable, f"hidden data readable in {out!r}: {readable}"


# ── channels ──────────────────────────────────────────────────────────────────────────────────


@FUZZ
@given(st.data(), hidden_arrays)
def test_a_probed_calls_exception_carries_no_hidden_value(data, a):
    """The words a student reads for a call that raised: probe_run masks the record on the way
    in (type 100, message 1000), failure.error_account masks it again to MAX_MESSAGE."""
    _, message = _embedded(data.draw, a)
    kind = data.draw(st.one_of(hostile, st.just("ValueError"), st.sampled_from(list(encodings(a).values()))))
    record = {"type": mask(kind, 100), "message": mask(message, 1000)}
    out = failure.error_account(CaseOutput("raised", error=record))
    type_shown, _, message_shown = out.partition(": ")
    assert_masked(type_shown, failure.MAX_TYPE)
    assert_masked(message_shown, failure.MAX_MESSAGE)
    assert_no_hidden_value(out, a)


class FakeOrtError(Exception):
    """What onnxruntime raises (its pybind11 classes are plain Exception subclasses too)."""


@FUZZ
@given(
    st.data(),
    hidden_arrays,
    st.sampled_from(sorted(onnx_errors.STATUS_NAMES)),
    st.sampled_from(["Gather", "Reshape", "Div", "QLinearGlobalAveragePool", "NotAnOp", "Gather node. x"]),
)
def test_an_onnx_runtime_error_is_a_fixed_sentence(data, a, code, op):
    """ONNX Runtime's message names the node and the values that broke the run; the student reads
    one of the fixed sentences, whatever the message holds."""
    how, payload = _embedded(data.draw, a)
    node_name = data.draw(hostile)
    message = (
        f"[ONNXRuntimeError] : {code} : {onnx_errors.STATUS_NAMES[code]} : Non-zero status code returned "
        f"while running {op} node. Name:'{node_name}' Status Message: {payload}"
    )
    out = onnx_errors.run_failure(FakeOrtError(message))
    assert_masked(out, student_text.MASK_LIMIT)
    assert_no_hidden_value(out, a)
    categories = "|".join(re.escape(words) for _, words in onnx_errors.CATEGORIES)
    sentence = (
        rf"{re.escape(onnx_errors.PREFIX)}: (?:a `(?P<op>[A-Za-z]+)` (?:{categories}|error)"
        rf"|an? (?:{categories}|error))(?: \((?P<status>[A-Z_]+)\))?"
    )
    m = re.fullmatch(sentence, out)
    assert m, out
    assert m["status"] == onnx_errors.STATUS_NAMES[code]
    assert m["op"] is None or (m["op"] == op.split()[0] and onnx_errors.known_operator(m["op"])), (
        "only a known operator is named"
    )
    assert (m["op"] is None) == (op == "NotAnOp")


@FUZZ
@given(st.data(), hidden_arrays)
def test_any_other_text_of_the_measuring_child_is_masked(data, a):
    """run_error from the interface checks (shapes a model made from the rows) and a worker failure."""
    _, text = _embedded(data.draw, a)
    out = mask(f"output probabilities is float32 of shape ({text}, 2) on a batch of 200 rows", RUN_ERROR_CHARS)
    assert_masked(out, RUN_ERROR_CHARS)
    assert_no_hidden_value(out, a)


results_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), hostile),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(hostile, inner, max_size=4)),
    max_leaves=12,
)


@FUZZ
@given(st.data(), hidden_arrays, results_values)
def test_results_keys_and_values_through_the_module(data, a, value):
    """RESULTS is copied before the first hidden input (so it cannot hold one); whatever it holds
    is still shown only cleaned, and masked if ever quoted from a place with hidden data."""
    key = data.draw(hostile)
    _, planted = _embedded(data.draw, a)
    results = {key: value, planted: planted}
    text = json.dumps(results, ensure_ascii=False, default=str)
    assert_one_clean_line(clean(text, 300), 300)
    rendered = escape.markdown(text, 300)
    assert "\n" not in rendered and rendered.encode("utf-8")
    out = mask(text)
    assert_masked(out, student_text.MASK_LIMIT)
    assert_no_hidden_value(out, a)


@FUZZ
@given(st.data(), hidden_arrays, st.sampled_from(["", ".onnx", ".ipynb", ".npz", "/x.onnx"]))
def test_file_names_through_the_module(data, a, suffix):
    """A file name in a code span: one clean line whose fence nothing inside can close."""
    _, name = _embedded(data.draw, a)
    name = name + suffix
    span = escape.code_span(name, 200)
    fence = re.match(r"`+", span).group(0)
    inner = span[len(fence) : -len(fence)]
    assert span.endswith(fence) and fence not in inner.strip(" "), span
    assert_one_clean_line(inner.strip(" ") or "x", 200)
    out = mask(name)
    assert_masked(out, student_text.MASK_LIMIT)
    assert_no_hidden_value(out, a)


@FUZZ
@given(hostile, st.integers(min_value=1, max_value=400))
def test_clean_is_one_bounded_line_for_any_text(text, limit):
    assert_one_clean_line(clean(text, limit), limit)
    lines = student_text.clean_lines(text, limit)
    lines.encode("utf-8")
    assert len(lines) <= limit
    assert not {unicodedata.category(ch) for ch in lines if ch not in "\n\t"} & CONTROL_CATEGORIES


@FUZZ
@given(hostile)
def test_mask_is_idempotent(text):
    """Masked twice (the probe's record, then the feedback's words) is masked once."""
    once = mask(text)
    assert mask(once) == once


# ── a table of the cases that were holes, and what must survive ──────────────────────────────

CASES = [
    # (text, what must not be shown)
    ("idx=50318600 must be within the inclusive range [-2,1]", "50318600"),
    ("丁七丂丄丅丆万丈", "丁七"),  # one CJK character per byte
    ("valeur ٥٠٣١٨٦٠٠", "٥٠٣"),  # Arabic-Indic digits
    ("x = ５０３１８６００", "５０"),  # fullwidth digits (NFKC: 50318600)
    ("𝟓𝟎𝟑𝟏𝟖𝟔𝟎𝟎", "𝟓𝟎"),  # mathematical digits
    ("⁵⁰³¹⁸⁶⁰⁰", "⁵⁰"),  # superscripts
    ("五千零三十一万八千六百", "五千"),  # CJK numerals
    ("ⅯⅯⅮⅭⅭⅬⅩⅩⅩ", "Ⅿ"),  # Roman numerals
    ("\ue012\ue034\ue056\ue078", "\ue012"),  # private use
    ("😀😁😂🤣", "😀"),  # emoji
    ("a\u0301\u0302\u0303\u0304\u0305", "\u0303"),  # stacked combining marks
    ("AADgPwAAEEBAAIBAAAAAAADgPw==", "AADgPwAAEEBAAIBAAAAAAADgPw"),  # base64, longer than a word
    ("3f800000c0490fdb", "3f800000"),  # hex
    ("1.0000001e-07, 2.5", "0000001"),
]


@pytest.mark.parametrize("text, secret", CASES)
def test_known_encodings_are_masked(text, secret):
    out = mask(f"ValueError: {text}")
    assert_masked(out, student_text.MASK_LIMIT)
    assert secret not in out, out


def test_a_word_of_letters_is_kept_the_channel_security_md_bounds():
    """Hex that happens to hold no digit is a word: kept, like any English word (the capacity of
    words is what SECURITY.md states; the masks above are what closes everything else)."""
    assert "deadbeefcafebabe" in mask("ValueError: deadbeefcafebabe")


@pytest.mark.parametrize(
    "text",
    [
        "OverflowError: Python integer <n> out of bounds for uint8",
        "could not broadcast input array from shape (<n>,) into shape (<n>,)",
        "ONNX Runtime could not run it on the grader's rows: a `Gather` index out of range (INVALID_ARGUMENT)",
        "TODO: dequantize",
    ],
)
def test_plain_english_errors_are_kept(text):
    assert mask(text) == text
