"""Which code cell defines a name: read from the cells' sources by the grader, never by the kernel.

When the probe finds ``quantize`` missing, the reason is almost always the cell that should have
defined it: a syntax error there, an exception before its ``def`` ran, or a cell that never ran.
:func:`find_definitions` finds that cell statically: each cell is parsed with :mod:`ast` (IPython
magics and shell lines blanked first), and a cell that does not parse, the very case that matters,
is read line by line instead: ``def quantize`` or ``class quantize`` at any indentation, or
``quantize = …`` / an import of it at the start of a line. Only a top-level definition counts
(also under ``if``/``try``/``with``/``for``), as only that one is visible to the probe.

Bounded: only cells whose text names the name are parsed, and a cell over :data:`MAX_PARSED_CHARS`
(or one that is too deep for Python's parser) is read line by line.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence

MAX_PARSED_CHARS = 200_000
_MAGIC = re.compile(r"^[ \t]*[%!?].*$", re.MULTILINE)
_BLOCKS = (ast.If, ast.Try, ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While)


def find_definitions(names: Iterable[str], sources: Sequence[str]) -> dict[str, list[tuple[int, int]]]:
    """``name → [(position of the cell in sources, line of the definition in it), …]`` in cell
    order, for each of ``names`` that some cell defines (a name no cell defines is left out)."""
    wanted = [n for n in dict.fromkeys(names) if isinstance(n, str) and n.isidentifier()]
    found: dict[str, list[tuple[int, int]]] = {}
    for pos, source in enumerate(sources):
        if not isinstance(source, str):
            continue
        here = [n for n in wanted if re.search(rf"\b{re.escape(n)}\b", source)]
        if not here:
            continue
        lines = _parsed(source, here)
        if lines is None:
            lines = _read_lines(source, here)
        for name in here:
            if name in lines:
                found.setdefault(name, []).append((pos, lines[name]))
    return found


def _parsed(source: str, names: list[str]) -> dict[str, int] | None:
    """name → line of its top-level definition, or None when the cell does not parse."""
    if len(source) > MAX_PARSED_CHARS:
        return None
    try:
        tree = ast.parse(_MAGIC.sub("", source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines: dict[str, int] = {}
    _collect(tree.body, set(names), lines)
    return lines


def _collect(body: list[ast.stmt], names: set[str], lines: dict[str, int]) -> None:
    for node in body:
        for name in _defined(node):
            if name in names:
                lines.setdefault(name, node.lineno)
        if isinstance(node, _BLOCKS):
            for block in (node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])):
                _collect(block, names, lines)
            for handler in getattr(node, "handlers", []):
                _collect(handler.body, names, lines)


def _defined(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    targets = (
        node.targets
        if isinstance(node, ast.Assign)
        else [node.target]
        if isinstance(node, (ast.AnnAssign, ast.AugAssign))
        else []
    )
    out: list[str] = []
    for target in targets:
        out += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
    return out


def _read_lines(source: str, names: list[str]) -> dict[str, int]:
    """The same, line by line, for a cell Python cannot parse (the text is all there is)."""
    lines: dict[str, int] = {}
    for number, line in enumerate(source.splitlines()[:20_000], start=1):
        for name in names:
            n = re.escape(name)
            if name not in lines and (
                re.match(rf"[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+{n}\b", line)
                or re.match(rf"{n}[ \t]*(?::[^=\n]*)?=(?!=)", line)
                or re.match(rf"(?:from[ \t]+\S+[ \t]+)?import[ \t].*\b{n}\b", line)
            ):
                lines[name] = number
    return lines


def is_stub(source: str, name: str) -> bool:
    """Whether the top-level function ``name`` that ``source`` defines (its last definition there)
    is still a starter's stub: past a docstring, its body is only ``raise NotImplementedError``
    (called or not), ``pass`` or ``...``. False when the cell does not parse or defines no such
    function: then nothing is known, and nothing is claimed."""
    if not isinstance(source, str) or len(source) > MAX_PARSED_CHARS:
        return False
    try:
        tree = ast.parse(_MAGIC.sub("", source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    found: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    _functions(tree.body, name, found)
    if not found:
        return False
    body = list(found[-1].body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            body = body[1:]  # the docstring
    return not body or (len(body) == 1 and _is_placeholder(body[0]))


def _functions(body: list[ast.stmt], name: str, found: list) -> None:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            found.append(node)
        if isinstance(node, _BLOCKS):
            for block in (node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])):
                _functions(block, name, found)
            for handler in getattr(node, "handlers", []):
                _functions(handler.body, name, found)


def _is_placeholder(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and stmt.value.value is Ellipsis:
        return True
    if isinstance(stmt, ast.Raise) and stmt.exc is not None:
        exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False
