"""What the model worker accepts and how it runs a model: one lesson's policy, from assignment.toml.

``[model_worker]`` in an assignment's ``assignment.toml`` (every key optional; the defaults are
the strict ones every lesson gets without the table)::

    [model_worker]
    extra_operators = ["com.microsoft.Gelu"]      # "<domain>.<op_type>" accepted beyond the default allowlist
    graph_optimization_level = "ORT_ENABLE_ALL"   # ORT_DISABLE_ALL | ORT_ENABLE_BASIC | ORT_ENABLE_EXTENDED | ORT_ENABLE_ALL
    max_model_mb = 64                             # the largest model file read
    max_nodes = 10000                             # nodes of all graphs together

:func:`policy_from_table` validates it (an :class:`~autograder.errors.AssignmentError` naming the
key on a bad value: an operator ONNX Runtime does not know, a level that does not exist, a limit
that is not a positive integer). :class:`ModelPolicy` is what
:func:`autograder.measure.onnx_load.run_model_worker` takes; ``Assignment.model_policy`` is the
lesson's. An operator is written as :func:`qualified_op` names it: ``op_type`` for the default ONNX
domain (``""`` or ``"ai.onnx"``), ``"<domain>.<op_type>"`` otherwise (``com.microsoft.Gelu``,
``ai.onnx.ml.ZipMap``).

Pure: no onnx or ONNX Runtime import until an ``extra_operators`` entry is checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from ..errors import AssignmentError

MiB = 1024 * 1024
GiB = 1024 * MiB

OPTIMIZATION_LEVELS = ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_ALL")
# ORT_ENABLE_ALL is what a student's default session runs, so reported numbers can be re-measured
# to the bit.
DEFAULT_OPTIMIZATION_LEVEL = "ORT_ENABLE_ALL"
DEFAULT_DOMAINS = ("", "ai.onnx")  # the default ONNX domain, under both of its names
MAX_MODEL_MB = 1024  # a table may raise the file cap this far (protobuf stops at 2 GB)
MAX_NODES = 1_000_000
TABLE = "model_worker"
KEYS = ("extra_operators", "graph_optimization_level", "max_model_mb", "max_nodes")


@dataclass(frozen=True)
class LoadLimits:
    """Caps for one artifact. The reference's largest model is ~270 KB with ~40 nodes."""

    max_file_bytes: int = 64 * MiB  # far above any sensible MLP, far below protobuf's 2 GB
    max_nodes: int = 10_000  # all graphs together
    max_graph_depth: int = 3  # If/Loop/Scan bodies inside bodies
    max_initializer_bytes: int = 256 * MiB  # declared (dims × item size), before anything is allocated
    memory_bytes: int = 3 * GiB  # RLIMIT_AS of the child; an idle ORT child maps < 1 GB
    timeout_s: float = 60.0  # wall clock for parse + check + session + all runs


def qualified_op(node) -> str:
    """An operator's name with its domain: ``op_type`` in the default ONNX domain (``""`` or
    ``"ai.onnx"``), ``"<domain>.<op_type>"`` otherwise (``com.microsoft.Gelu``, ``ai.onnx.ml.ZipMap``).
    ``node``: an ``onnx.NodeProto`` (anything with ``domain`` and ``op_type``)."""
    domain = node.domain or ""
    return node.op_type if domain in DEFAULT_DOMAINS else f"{domain}.{node.op_type}"


def split_op(qualified: str) -> tuple[str, str]:
    """``(domain, op_type)`` of a :func:`qualified_op` name (``"Relu"`` → ``("", "Relu")``;
    ``"ai.onnx.Relu"`` → ``("", "Relu")``)."""
    domain, _, op_type = qualified.rpartition(".")
    return ("" if domain in DEFAULT_DOMAINS else domain), op_type


def normal_op(qualified: str) -> str:
    """``qualified`` as :func:`qualified_op` writes it (``"ai.onnx.Relu"`` → ``"Relu"``)."""
    domain, op_type = split_op(qualified)
    return f"{domain}.{op_type}" if domain else op_type


@lru_cache(maxsize=1)
def _ort_schemas() -> frozenset[tuple[str, str]] | None:
    """``(domain, op_type)`` of every operator ONNX Runtime registers (its contrib ops included),
    or None when this build does not expose them."""
    try:
        from onnxruntime.capi.onnxruntime_pybind11_state import get_all_operator_schema
    except ImportError:
        return None
    return frozenset((("" if s.domain in DEFAULT_DOMAINS else s.domain), s.name) for s in get_all_operator_schema())


def known_operator(qualified: str) -> bool:
    """Whether ONNX Runtime (or, without its schema list, ONNX) knows the operator ``qualified``."""
    domain, op_type = split_op(qualified)
    if not op_type:
        return False
    schemas = _ort_schemas()
    if schemas is not None:
        return (domain, op_type) in schemas
    import onnx.defs

    return onnx.defs.has(op_type, domain)


@dataclass(frozen=True)
class ModelPolicy:
    """One lesson's model worker policy (see the module's docstring). The default is the strict
    one: no operator beyond the allowlist of :mod:`.onnx_load`, ``ORT_ENABLE_ALL``, today's limits."""

    extra_operators: frozenset[str] = frozenset()
    optimization_level: str = DEFAULT_OPTIMIZATION_LEVEL
    limits: LoadLimits = field(default_factory=LoadLimits)

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra_operators", frozenset(map(normal_op, self.extra_operators)))
        if self.optimization_level not in OPTIMIZATION_LEVELS:
            raise ValueError(
                f"unknown graph optimization level {self.optimization_level!r}; one of {', '.join(OPTIMIZATION_LEVELS)}"
            )

    def at_level(self, level: str | None) -> ModelPolicy:
        """This policy with another optimization level (``None``: unchanged)."""
        return self if level is None or level == self.optimization_level else replace(self, optimization_level=level)


DEFAULT_POLICY = ModelPolicy()


def _positive_int(table: Mapping[str, Any], key: str, default: int, cap: int, where: str) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= cap:
        raise AssignmentError(f"{where}: [{TABLE}] {key} must be a whole number from 1 to {cap:,}, got {value!r}")
    return value


def policy_from_table(table: Any, where: str) -> ModelPolicy:
    """The :class:`ModelPolicy` of an assignment's ``[model_worker]`` table (``{}``: the default);
    ``where`` names the file in messages. Raises :class:`AssignmentError` naming the bad key."""
    if not isinstance(table, Mapping):
        raise AssignmentError(f"{where}: [{TABLE}] must be a table")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise AssignmentError(
            f"{where}: [{TABLE}] has unknown key(s) {', '.join(map(repr, unknown))}; known: {', '.join(KEYS)}"
        )
    extra = table.get("extra_operators", [])
    if not isinstance(extra, list) or not all(isinstance(op, str) for op in extra):
        raise AssignmentError(
            f'{where}: [{TABLE}] extra_operators must be a list of "<domain>.<op_type>" strings, got {extra!r}'
        )
    unknown_ops = [op for op in extra if not known_operator(op)]
    if unknown_ops:
        raise AssignmentError(
            f"{where}: [{TABLE}] extra_operators names operator(s) ONNX Runtime does not "
            f'know: {", ".join(map(repr, unknown_ops))} (write "<domain>.<op_type>", '
            'e.g. "com.microsoft.Gelu")'
        )
    level = table.get("graph_optimization_level", DEFAULT_OPTIMIZATION_LEVEL)
    if level not in OPTIMIZATION_LEVELS:
        raise AssignmentError(
            f"{where}: [{TABLE}] graph_optimization_level must be one of "
            f"{', '.join(OPTIMIZATION_LEVELS)}, got {level!r}"
        )
    defaults = LoadLimits()
    limits = replace(
        defaults,
        max_file_bytes=_positive_int(table, "max_model_mb", defaults.max_file_bytes // MiB, MAX_MODEL_MB, where) * MiB,
        max_nodes=_positive_int(table, "max_nodes", defaults.max_nodes, MAX_NODES, where),
    )
    return ModelPolicy(frozenset(map(normal_op, extra)), level, limits)
