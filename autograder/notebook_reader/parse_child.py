"""Parse a submitted notebook in a child process: the grader's memory never holds the parse.

This file is self-contained (standard library only) because it does not run as an import: the
grader passes its source to ``python -I -S -c SOURCE LIMITS_JSON`` with the notebook's bytes on
standard input (see :func:`autograder.notebook_reader.reader.load_notebook`). A 30 MB notebook of a
million tiny objects takes gigabytes once parsed, and an integer of 5,000 digits or a
200,000-deep nesting makes ``json.loads`` raise; here that costs a child process (with its own
address-space limit and the caller's timeout), never the grader.

It prints one JSON line: ``{"cells": [[index, source], ...], "total": n, "language": name,
"declared": {key: id}}`` (the code cells, in order, how many cells the notebook has, the language
its kernelspec or language_info names when that is not Python, else null, and the strings found at
the metadata paths the caller asked for in ``declared_at``), or ``{"error": "reason for the
student"}``. With ``"cells": false`` in the limits the code cells are left out (the caller only
needs the metadata). Limits: ``max_bytes`` of input, ``max_objects`` JSON objects and
``max_arrays`` JSON arrays (both counted before anything is built, so a file of millions of
``[]`` costs a scan, not gigabytes), ``max_int_digits`` per integer, ``max_code_cells`` code
cells and ``max_code_chars`` characters of code in all (what comes back is bounded too); nesting
is bounded by Python's recursion limit. The child makes itself the first choice of an
out-of-memory killer (``oom_score_adj``): in a full container it goes before the grader does.
"""

import json
import re
import resource
import sys

_NAME_CHARS = re.compile(r"[^A-Za-z0-9+#._ -]")
# a JSON string (escapes included); an unterminated one runs to the end, so the scan stays linear
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\Z)', re.DOTALL)
MAX_LANGUAGE_CHARS = 40
MAX_DECLARED_CHARS = 101  # longer than any id the grader accepts: the caller refuses it


class Refused(Exception):
    pass


def _source(cell, index):
    src = cell.get("source", "")
    if isinstance(src, list) and all(isinstance(s, str) for s in src):
        return "".join(src)
    if isinstance(src, str):
        return src
    raise Refused(f"cell {index + 1} of the notebook has a source that is neither text nor a list of lines")


def parse(data, name, limits):
    """``(code cells, number of cells, declared language, declared ids, answers)`` of the notebook
    ``data`` (bytes), or Refused with the reason."""
    if len(data) > limits["max_bytes"]:
        raise Refused(f"{name} is more than {limits['max_bytes']:,} bytes; hint: clear the outputs before submitting")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Refused(f"{name} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    _count_containers(text, name, limits)
    objects = [0]

    def on_object(pairs):
        objects[0] += 1
        if objects[0] > limits["max_objects"]:
            raise Refused(
                f"{name} holds more than {limits['max_objects']:,} JSON objects (cells, outputs, "
                "metadata); hint: clear the outputs and remove empty cells before submitting"
            )
        return dict(pairs)

    def on_int(digits):
        if len(digits.lstrip("-")) > limits["max_int_digits"]:
            raise Refused(f"{name} holds an integer of {len(digits):,} digits")
        return int(digits)

    try:
        raw = json.loads(text, object_pairs_hook=on_object, parse_int=on_int)
    except RecursionError:
        raise Refused(f"{name} is nested too deeply to be a notebook") from None
    except MemoryError:
        raise Refused(f"{name} is too large to read as a notebook; hint: clear the outputs") from None
    except ValueError as e:  # json.JSONDecodeError is a ValueError
        raise Refused(
            f"{name} is not valid JSON ({str(e)[:120]}); hint: it may be truncated or not a .ipynb file"
        ) from None
    major = raw.get("nbformat") if isinstance(raw, dict) else None
    old = isinstance(major, int) and not isinstance(major, bool) and major < 4
    if not isinstance(raw, dict) or "cells" not in raw and "worksheets" not in raw and not old:
        raise Refused(f"{name} is JSON but not a Jupyter notebook (no 'cells')")
    if not isinstance(major, int) or isinstance(major, bool) or major < 4:
        raise Refused(
            f"{name} uses notebook format {str(major)[:20]}; format 4 is needed (hint: open and "
            "save it in a current Jupyter)"
        )
    cells = raw.get("cells")
    if not isinstance(cells, list):
        raise Refused(f"{name}: 'cells' is not a list")
    out = []
    chars = 0
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise Refused(f"cell {i + 1} of {name} is malformed (no cell_type)")
        if cell["cell_type"] == "code":
            out.append([i, _source(cell, i)])
            chars += len(out[-1][1])
            if len(out) > limits["max_code_cells"]:
                total = sum(1 for c in cells if isinstance(c, dict) and c.get("cell_type") == "code")
                raise Refused(
                    f"{name} has {total:,} code cells, more than the {limits['max_code_cells']:,} "
                    "the grader runs; hint: merge cells or remove empty ones"
                )
            if chars > limits["max_code_chars"]:
                raise Refused(
                    f"{name} holds more than {limits['max_code_chars']:,} characters of code; hint: "
                    "load data from a file instead of pasting it into a cell"
                )
    answers = question_answers(cells, limits.get("questions") or [], limits.get("max_answer_chars", 0))
    return out, len(cells), declared_language(raw), declared_ids(raw, limits.get("declared_at") or {}), answers


def question_answers(cells, questions, max_chars):
    """question → the text of the cells inside its ``<!-- BEGIN QUESTION -->`` block (otter's
    delimiters), after the cell that asks it and up to ``<!-- END QUESTION -->`` or the next
    question; the question is found by a text its first cell contains. Missing: not a key."""
    answers = {}
    for question in questions:
        start = next(
            (
                i
                for i, c in enumerate(cells)
                if isinstance(c, dict) and "BEGIN QUESTION" in _text(c) and question in _text(c)
            ),
            None,
        )
        if start is None:
            continue
        parts, size = [], 0
        for c in cells[start + 1 :]:
            text = _text(c) if isinstance(c, dict) else ""
            if "END QUESTION" in text or "BEGIN QUESTION" in text:
                break
            parts.append(text)
            size += len(text)
            if size > max_chars:
                break
        answers[question] = "\n\n".join(parts)[:max_chars]
    return answers


def _text(cell):
    src = cell.get("source", "")
    if isinstance(src, list):
        return "".join(s for s in src if isinstance(s, str))
    return src if isinstance(src, str) else ""


def _count_containers(text, name, limits):
    """Refuse, before anything is built, a text with more JSON objects or arrays than allowed:
    brackets are counted outside strings (exact for valid JSON; the parse refuses the rest)."""
    bare = _STRING.sub("", text) if '"' in text else text
    arrays, objects = bare.count("["), bare.count("{")
    del bare
    if arrays > limits["max_arrays"]:
        raise Refused(
            f"{name} holds more than {limits['max_arrays']:,} JSON lists ({arrays:,}); it is not a "
            "notebook the grader can run (hint: clear the outputs before submitting)"
        )
    if objects > limits["max_objects"]:
        raise Refused(
            f"{name} holds more than {limits['max_objects']:,} JSON objects (cells, outputs, "
            "metadata); hint: clear the outputs and remove empty cells before submitting"
        )


def declared_ids(raw, paths):
    """``{key: string}`` for each ``key: [block, field]`` of ``paths`` whose
    ``metadata.<block>.<field>`` is a string (cut to MAX_DECLARED_CHARS; the caller checks it)."""
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    found = {}
    for key, (block, field) in paths.items():
        value = meta.get(block) if isinstance(meta, dict) else None
        value = value.get(field) if isinstance(value, dict) else None
        if isinstance(value, str):
            found[key] = value[:MAX_DECLARED_CHARS]
    return found


def declared_language(raw):
    """The language the notebook's metadata names, when it is not Python (else None): from
    ``metadata.kernelspec.language``, ``metadata.language_info.name`` or the kernelspec's name.
    Only letters, digits and ``+#._ -`` are kept, at most MAX_LANGUAGE_CHARS of them."""
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    if not isinstance(meta, dict):
        return None
    spec = meta.get("kernelspec") if isinstance(meta.get("kernelspec"), dict) else {}
    info = meta.get("language_info") if isinstance(meta.get("language_info"), dict) else {}
    for value in (spec.get("language"), info.get("name"), spec.get("name")):
        if isinstance(value, str):
            name = _NAME_CHARS.sub("", value).strip()[:MAX_LANGUAGE_CHARS]
            if name:
                return None if name.lower().startswith(("python", "ipython")) else name
    return None


def _first_to_be_killed():
    try:
        with open("/proc/self/oom_score_adj", "w", encoding="ascii") as f:
            f.write("1000")
    except OSError:
        pass


def main(limits_json):
    limits = json.loads(limits_json)
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"],) * 2)
    _first_to_be_killed()
    name = limits["name"]
    try:
        data = sys.stdin.buffer.read(limits["max_bytes"] + 1)
        cells, total, language, declared, answers = parse(data, name, limits)
        result = {
            "cells": cells if limits.get("cells", True) else [],
            "total": total,
            "language": language,
            "declared": declared,
            "answers": answers,
        }
    except Refused as e:
        result = {"error": str(e)}
    except MemoryError:
        result = {"error": f"{name} is too large to read as a notebook; hint: clear the outputs"}
    # ASCII: a lone surrogate (valid JSON, not encodable text) travels as an escape; the grader
    # replaces it (autograder/student_text.py, the one place that scrubs text)
    sys.stdout.buffer.write(json.dumps(result).encode("ascii") + b"\n")


if __name__ == "__main__":
    main(sys.argv[1])
