"""Tolerances as data: the calibrated ``tolerances.toml``, an instructor's partial override, and
what is recorded about both.

- ``merge_tolerances(calibrated, override)``: an override file names only the keys it changes
  (``[size]\\ndynamic_ratio_max = 0.40``); every other key keeps its calibrated value. A key the
  calibrated file does not have is refused (a typo would otherwise change nothing, silently), and
  so is a value of another kind (a table where a number was). ``[provenance]`` stays the
  calibrated one: the override is recorded beside it, under ``override``.
- ``tolerances_record(...)``: what batch.json, grade.json and results.json ``extra_data`` carry:
  both files' paths and SHA-256, and every overridden key with its calibrated and new value.
- ``version_drift(tolerances, environment)``: the packages whose version in the grading run is not
  the one the tolerances were calibrated with (onnxruntime, onnx, numpy, scikit-learn). A warning
  for the instructor, never a change of score.

The judge stays pure: it receives the merged dict and never knows a file was merged.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

from .errors import AssignmentError

PROVENANCE = "provenance"
OVERRIDE = "override"
DRIFT_PACKAGES = ("onnxruntime", "onnx", "numpy", "scikit-learn")


def merge_tolerances(
    calibrated: dict[str, Any], override: dict[str, Any], *, source: str = "override"
) -> dict[str, Any]:
    """``calibrated`` with the keys of ``override`` replaced; raises AssignmentError on an unknown key."""
    merged = copy.deepcopy(calibrated)
    changed: dict[str, dict[str, Any]] = {}
    for key, value in override.items():
        if key == PROVENANCE:
            continue  # a copy of the whole file carries the calibrated provenance: nothing to merge
        _merge_entry(merged, key, value, key, source, changed)
    if changed:
        merged.setdefault(PROVENANCE, {})
        merged[PROVENANCE] = {**merged[PROVENANCE], OVERRIDE: {"source": source, "changed": changed}}
    return merged


def _merge_entry(
    table: dict[str, Any], key: str, value: Any, path: str, source: str, changed: dict[str, dict[str, Any]]
) -> None:
    if key not in table:
        known = ", ".join(sorted(k for k in table if k != PROVENANCE)[:12])
        raise AssignmentError(
            f"{source}: '{path}' is not a tolerance of the calibrated file "
            f"(keys here: {known or 'none'}); an override may only change existing keys"
        )
    current = table[key]
    if _is_section(current):
        if not isinstance(value, dict):
            raise AssignmentError(
                f"{source}: '{path}' is a table of tolerances in the calibrated file, "
                f"not a single value; write [{path}] with the keys to change"
            )
        for sub, sub_value in value.items():
            _merge_entry(current, sub, sub_value, f"{path}.{sub}", source, changed)
        return
    old = _plain(current)
    new = _plain(value)
    if not _same_kind(old, new):
        raise AssignmentError(f"{source}: '{path}' = {new!r} is not of the kind of its calibrated value {old!r}")
    if isinstance(current, dict) and "value" in current:
        table[key] = {**current, "value": new, "calibrated_value": old, "overridden": True}
    else:
        table[key] = new
    if new != old:
        changed[path] = {"calibrated": old, "value": new}


def _is_section(entry: Any) -> bool:
    """A table of tolerances (not one tolerance written as ``{value = …, worst = …}``)."""
    return isinstance(entry, dict) and "value" not in entry


def _plain(entry: Any) -> Any:
    return entry.get("value") if isinstance(entry, dict) else entry


def _same_kind(old: Any, new: Any) -> bool:
    def kind(x: Any) -> str:
        if isinstance(x, bool):
            return "bool"
        if isinstance(x, (int, float)):
            return "number"
        return type(x).__name__

    return kind(old) == kind(new)


def file_sha256(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def tolerances_record(calibrated_path: Path, override_path: Path | None, merged: dict[str, Any]) -> dict[str, Any]:
    """What a grade records about the tolerances it was judged with."""
    override = merged.get(PROVENANCE, {}).get(OVERRIDE, {}) if isinstance(merged.get(PROVENANCE), dict) else {}
    return {
        "calibrated": {"path": str(calibrated_path), "sha256": file_sha256(calibrated_path)},
        "override": (
            {
                "path": str(override_path),
                "sha256": file_sha256(override_path),
                "changed": dict(override.get("changed", {})),
            }
            if override_path
            else None
        ),
        "values": flat_values(merged),
    }


def public_tolerances_record(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` as results.json carries it: each file by its name and hash, never the grader's
    path (results.json is shown to the student)."""

    def files(entry: Any) -> Any:
        if not isinstance(entry, dict):
            return entry
        return {**entry, "path": Path(str(entry.get("path", ""))).name}

    return {**record, "calibrated": files(record.get("calibrated")), "override": files(record.get("override"))}


def flat_values(tolerances: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"size.dynamic_ratio_max": 0.3367, …}``: the value the judge reads for every key."""
    out: dict[str, Any] = {}
    for key, entry in tolerances.items():
        if not prefix and key == PROVENANCE:
            continue
        path = f"{prefix}{key}"
        if _is_section(entry):
            out.update(flat_values(entry, f"{path}."))
        else:
            out[path] = _plain(entry)
    return out


def version_drift(tolerances: dict[str, Any], environment: Any) -> list[str]:
    """One message per package whose grading version differs from the calibration's; [] when
    either side does not say."""
    prov = found if isinstance(found := tolerances.get(PROVENANCE), dict) else {}
    calibrated = prov.get("versions") if isinstance(prov.get("versions"), dict) else {}
    if not isinstance(environment, dict) or not calibrated:
        return []
    out = []
    for name in DRIFT_PACKAGES:
        then, now = calibrated.get(name), environment.get(name)
        if then and now and str(then) != str(now):
            out.append(
                f"{name} {now} grades here, but the tolerances were calibrated with {name} {then}: "
                "scores are unchanged; re-run `autograder calibrate` on this version or check "
                "the thresholds"
            )
    return out
