"""How notebooks are graded: the options a front end was given, carried as one value.

The command line (``grade``, ``batch``, ``rescore``), the batch and its workers (the local pool
and Dask: a ``GradeOptions`` is pickled into every job) and Gradescope's ``run`` hand the same
value down to :func:`autograder.pipeline.grade_notebook` and ``rejudge``, the places that read it.
A new option is a field here, not a parameter added to every function on the way.

What is not an option of the grade stays out: where the batch runs (``jobs``, ``scheduler``), its
cache, the sandbox slot a worker holds, the folder a grade writes to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class GradeOptions:
    """The same for every notebook of a run. Frozen and picklable: it travels to workers as is."""

    tolerances: Path | None = None  # an override of some tolerances (instructor's TOML); None: the calibrated ones
    rubric: Path | None = None  # another rubric.toml; None: the assignment's own
    unsafe_no_sandbox: bool = False  # run even when no isolation layer is available (trusted notebooks only)
    kernel_template: bool = False  # kernels from the slot's template where it holds (a batch; --fresh-kernels: off)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON, one key per field (a path as a string, none as null): batch.json keeps each
        task's options so."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GradeOptions:
        """The inverse of ``to_json``, read from any record that holds its keys (a missing key keeps
        its default; an empty path is none)."""
        given = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        for f in fields(cls):
            if f.name in given and _is_path(f.type):
                given[f.name] = Path(given[f.name]) if given[f.name] else None
        return cls(**given)


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


def _is_path(annotation: Any) -> bool:
    return "Path" in str(annotation)  # the annotations are strings here (``from __future__ import annotations``)
