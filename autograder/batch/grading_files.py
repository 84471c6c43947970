"""Which tolerances override and rubric a batch or a rescore judges with, and the line that says so.

One rule for ``batch`` and ``rescore``: a file given is used; else the one the batch's last run or
rescore used (``batch.json``), so an override is never dropped silently; else, or with
``--calibrated``, the assignment's calibrated tolerances and its own rubric.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..assignment import Assignment
from ..errors import AutograderError
from ..tolerances import tolerances_record


class GradingFilesError(AutograderError):
    """--calibrated with --tolerances, or a kept file that is gone: a mistake in the command (exit 2)."""


@dataclass(frozen=True)
class GradingFiles:
    """The tolerances override and rubric a batch or rescore judges with, and why those."""

    tolerances: Path | None
    rubric: Path | None
    tolerances_how: str  # "given" | "kept" (from the batch's last run) | "calibrated"
    rubric_how: str  # "given" | "kept" | "assignment"

    def record(self, assignment: Assignment, limits: dict[str, Any]) -> dict[str, Any]:
        """batch.json's ``tolerances_used``: the tolerances record, how they were chosen, the line."""
        return {
            **tolerances_record(assignment.tolerances_path, self.tolerances, limits),
            "chosen": self.tolerances_how,
            "note": self.note(assignment, limits),
        }

    def note(self, assignment: Assignment, limits: dict[str, Any]) -> str:
        """One line for the console: which tolerances (and rubric) judge, and why those."""
        used = tolerances_record(assignment.tolerances_path, self.tolerances, limits)
        if self.tolerances is None:
            line = f"tolerances: the calibrated ones ({assignment.tolerances_path.name}, no override)"
        else:
            changed = (used.get("override") or {}).get("changed") or {}
            keys = ", ".join(f"{k} {v.get('calibrated')} → {v.get('value')}" for k, v in list(changed.items())[:4])
            more = f" and {len(changed) - 4} more" if len(changed) > 4 else ""
            why = (
                "kept from the last run of this batch; --calibrated goes back"
                if self.tolerances_how == "kept"
                else "given"
            )
            line = f"tolerances: override {self.tolerances} ({why}): {keys or 'no key changed'}{more}"
        if self.rubric is not None:
            line += f" · rubric: {self.rubric} ({'kept from the last run' if self.rubric_how == 'kept' else 'given'})"
        return line


def grading_files(
    out: Path, batch: dict[str, Any] | None, tolerances: Path | None, rubric: Path | None, *, calibrated: bool = False
) -> GradingFiles:
    """The one rule for ``batch`` and ``rescore``: a file given is used; else the one the batch's
    last run or rescore used (batch.json), so an override is never dropped silently; else, or with
    ``calibrated``, the assignment's calibrated tolerances and its own rubric. A kept file that is
    gone is an error (exit 2), not a silent return to the calibrated values."""
    if calibrated and tolerances is not None:
        raise GradingFilesError(
            "--calibrated judges with the calibrated tolerances, --tolerances with an override: give one of them"
        )
    chosen: dict[str, tuple[Path | None, str]] = {}
    for key, given, default in (("tolerances", tolerances, "calibrated"), ("rubric", rubric, "assignment")):
        kept = None if calibrated else str((batch or {}).get(key) or "") or None
        if given is not None:
            chosen[key] = (Path(given).resolve(), "given")
        elif kept is None:
            chosen[key] = (None, default)
        elif not Path(kept).is_file():
            raise GradingFilesError(
                f"the {key} file {kept}, which the last run of {out} judged with, is gone: give it "
                f"again with --{key}, or pass --calibrated to judge with the assignment's own"
            )
        else:
            chosen[key] = (Path(kept), "kept")
    return GradingFiles(
        tolerances=chosen["tolerances"][0],
        rubric=chosen["rubric"][0],
        tolerances_how=chosen["tolerances"][1],
        rubric_how=chosen["rubric"][1],
    )
