"""Dotted paths into measurements and tolerances (``models.int8_dynamic.quality.accuracy_drop``).

The bottom of the import graph: the judge, the rubric, the reports and calibration all walk
measurements.json and tolerances.toml this one way, and it imports nothing of the grader.

- A key that itself contains dots (``reported.fields.fp32.size_bytes``) is found too: at each
  level the longest matching key wins.
- A list element is addressed by its index (``calibrated_input_range.0``).
- A section ``{"error": "…"}`` met anywhere on the way (or at its end) yields that error as the
  reason; a field left out of a section is explained by a string ``*_error`` key beside it.
- A missing key or a ``null`` value yields ``"measurement missing: <path>"``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_INDEX = re.compile(r"-?\d+")


def lookup(data: Any, path: str) -> tuple[Any, str | None]:
    """``(value, None)`` when ``path`` leads to a value, else ``(None, reason)``."""
    missing = f"measurement missing: {path}"
    node, segments, i = data, path.split("."), 0
    while True:
        if isinstance(node, Mapping) and node.get("error") is not None:
            return None, str(node["error"])
        if i == len(segments):
            break
        if isinstance(node, Mapping):
            for j in range(len(segments), i, -1):  # longest key first: keys may contain dots
                key = ".".join(segments[i:j])
                if key in node:
                    node, i = node[key], j
                    break
            else:
                return None, _sibling_error(node) or missing
        elif (
            isinstance(node, (list, tuple))
            and _INDEX.fullmatch(segments[i])
            and -len(node) <= int(segments[i]) < len(node)
        ):
            node, i = node[int(segments[i])], i + 1
        else:
            return None, missing
    if node is None:
        return None, missing
    return plain(node), None


def _sibling_error(node: Mapping[str, Any]) -> str | None:
    """Why a field is absent: measurements record it in a ``*_error`` key beside the field."""
    for key in sorted(node):
        if str(key).endswith("_error") and isinstance(node[key], str) and node[key]:
            return str(node[key])
    return None


def plain(value: Any) -> Any:
    """A deep copy as plain JSON-like Python: numpy scalars and arrays become floats, ints, lists."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return plain(value.tolist())
    return value


def is_number(x: Any) -> bool:
    """An int or a float, but not a bool."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)
