"""The files between the stages, as JSON Schemas (draft 2020-12) shipped in ``autograder/schemas/``.

One schema per contract: ``execution`` (execution.json), ``measurements`` (measurements.json:
the core's envelope, lesson sections open), ``grade`` (grade.json), ``rubric`` (rubric.toml as
loaded), ``tolerances`` (tolerances.toml, or an override file), ``batch`` (a batch's
batch.json), ``assignment`` (assignment.toml as loaded: the core's tables closed) and
``gradescope_results`` (Gradescope's documented results.json, strict). ``validate(kind, data, source)`` raises ``ContractError`` naming the file, the JSON
path and what is wrong; ``first_problem`` gives the same without raising, for a caller that
names the place its own way (the rubric names a check and a part); ``knows_path`` whether a
dotted path (``execution.first_error.where``) names a field a schema allows.

A schema may say what a failing keyword means in its own words: ``"x-errors": {"required":
"…"}`` beside the keyword (``{value}`` is the offending value, ``{key}`` its key).
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib.resources import files
from typing import Any

import jsonschema
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from .errors import AutograderError

KINDS = ("execution", "measurements", "grade", "rubric", "tolerances", "batch", "assignment", "gradescope_results")
_VALUE_CHARS = 80


class ContractError(AutograderError):
    """A file between the stages does not have the shape its schema states."""


def schema(kind: str) -> dict[str, Any]:
    """The schema of ``kind`` (one of ``KINDS``) as a dict of its own."""
    return copy.deepcopy(_schema(kind))


def first_problem(kind: str, data: Any) -> tuple[list[str | int], str] | None:
    """``(path, message)`` of the first place where ``data`` breaks the schema, or None."""
    for error in _validator(kind).iter_errors(data):
        error = _inner(error)
        return list(error.absolute_path), _describe(error, kind)
    return None


def validate(kind: str, data: Any, source: str | None = None) -> None:
    """Raise ``ContractError("<source>: <json path>: <what is wrong>")`` unless ``data`` fits."""
    problem = first_problem(kind, data)
    if problem is not None:
        path, message = problem
        raise ContractError(f"{source or kind}: {json_path(path)}: {message} (schema: {kind}.schema.json)")


def knows_path(kind: str, path: str) -> bool:
    """Whether the dotted ``path`` (``execution.first_error.where``) can name a value in a file of
    ``kind``: False when a closed table of the schema has no such key, or a value of the schema
    has no parts; True through any part the schema leaves open (an assignment's sections)."""
    top = _schema(kind)
    return _knows(top, path.split("."), _registry().resolver(base_uri=top["$id"]))


def _knows(node: Any, segments: list[str], resolver: Any) -> bool:
    if not segments or node is True or node is False:
        return node is not False
    flat = _flat(node, resolver)
    for n, r in flat:
        branches = n.get("oneOf", []) + n.get("anyOf", [])
        if branches:
            return any(_knows(b, segments, r) for b in branches)
    key, rest = segments[0], segments[1:]
    for n, r in flat:
        if key in n.get("properties", {}):
            return _knows(n["properties"][key], rest, r)
    for n, r in flat:
        if "items" in n and key.lstrip("-").isdigit():
            return _knows(n["items"], rest, r)
    for n, r in flat:
        if "additionalProperties" in n:
            return _knows(n["additionalProperties"], rest, r)
    if any(n.get("unevaluatedProperties") is False or "enum" in n or "const" in n for n, _ in flat):
        return False
    types = {t for n, _ in flat for t in ([n["type"]] if isinstance(n.get("type"), str) else n.get("type", []))}
    return not types or bool(types & {"object", "array"})


def _flat(node: Any, resolver: Any) -> list[tuple[dict[str, Any], Any]]:
    """``node`` with what its ``$ref`` and ``allOf`` bring in, each with the resolver to read it by."""
    if not isinstance(node, dict):
        return []
    out = [(node, resolver)]
    if "$ref" in node:
        resolved = resolver.lookup(node["$ref"])
        out += _flat(resolved.contents, resolved.resolver)
    for member in node.get("allOf", []):
        out += _flat(member, resolver)
    return out


def _inner(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """For "none of the choices fit" (``oneOf``/``anyOf`` without words of its own), the deepest
    error of a choice of the right type, so the message names the key inside
    (``$.first_error.cell``, not "first_error must be null"); the error itself when no choice
    has the value's type."""
    while (
        error.validator in ("oneOf", "anyOf")
        and error.context
        and error.validator not in error.schema.get("x-errors", {})
    ):
        depth = len(error.absolute_path)
        closer = [e for e in error.context if not (e.validator == "type" and len(e.absolute_path) == depth)]
        if not closer:
            break
        error = max(closer, key=lambda e: len(e.absolute_path))
    return error


def json_path(path: list[str | int]) -> str:
    """``$.cells[3].status``."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _describe(error: jsonschema.ValidationError, file_kind: str) -> str:
    """One error in an instructor's words: the schema's own ``x-errors`` text, else by keyword."""
    key = next((str(p) for p in reversed(error.absolute_path) if isinstance(p, str)), "value")
    value = _short(error.instance)
    own = error.schema.get("x-errors", {}) if isinstance(error.schema, dict) else {}
    if error.validator in own:
        return str(own[error.validator]).format(value=value, key=key)
    kind, expected = error.validator, error.validator_value
    if kind in ("additionalProperties", "unevaluatedProperties") and isinstance(error.instance, dict):
        flat = _flat(error.schema, _registry().resolver(base_uri=_schema(file_kind)["$id"]))
        known = sorted({k for n, _ in flat for k, v in n.get("properties", {}).items() if v is not False})
        extra = sorted(k for k in error.instance if k not in known)
        return f"unknown key(s) {', '.join(extra)} (known: {', '.join(known)})"
    if kind == "required":
        missing = [k for k in expected if isinstance(error.instance, dict) and k not in error.instance]
        return f"needs {', '.join(missing)}"
    if kind in ("enum", "const"):
        choices = expected if kind == "enum" else [expected]
        return f"unknown {key} {value} (known: {' '.join(str(c) for c in choices)})"
    if kind == "type":
        names = expected if isinstance(expected, list) else [expected]
        return f"{key} must be {' or '.join(_TYPE_WORDS.get(str(n), str(n)) for n in names)}, got {value}"
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        sign = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}[kind]
        return f"{key} must be {sign} {expected}, got {value}"
    if kind == "minItems":
        return f"{key} needs at least {expected} entr{'y' if expected == 1 else 'ies'}"
    if kind == "minLength":
        return f"{key} must not be empty"
    return f"{key}: {error.message}"


_TYPE_WORDS = {
    "object": "a table",
    "array": "a list",
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "true or false",
    "null": "null",
}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"


@cache
def _schema(kind: str) -> dict[str, Any]:
    if kind not in KINDS:
        raise ValueError(f"no contract named {kind!r} (known: {', '.join(KINDS)})")
    return json.loads(files(__package__).joinpath("schemas", f"{kind}.schema.json").read_text(encoding="utf-8"))


@cache
def _validator(kind: str) -> jsonschema.Draft202012Validator:
    loaded = _schema(kind)
    jsonschema.Draft202012Validator.check_schema(loaded)
    return jsonschema.Draft202012Validator(loaded, registry=_registry())


@cache
def _registry() -> Registry:
    """Every shipped schema under its ``$id``, so one may refer to another (measurements'
    ``execution`` is execution.json's record)."""
    return Registry().with_resources((s["$id"], DRAFT202012.create_resource(s)) for s in map(_schema, KINDS))
