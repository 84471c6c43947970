"""The interface between the core and an assignment's ``grading/`` package, enforced here.

An assignment's trusted grading code is a Python package ``assignments/<id>/grading/``. The core
calls it only through :class:`GradingPlugin`, which checks what the package defines when it is
loaded (the required ``probe_cases`` and ``measure``, the optional hooks in :data:`OPTIONAL`) and
what each hook returns when it is called (probe cases with unique ids; sections that are dicts
with identifier names, never one of :data:`RESERVED_SECTIONS`). The interface is described once,
for authors, in docs/ADDING-AN-ASSIGNMENT.md, section 3; anything else the package holds stays
its own and is reachable as attributes of the plugin.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from .errors import AssignmentError
from .probe_format import ProbeCase, check_cases

REQUIRED = ("probe_cases", "measure")
OPTIONAL = ("prepare", "measure_artifacts", "calibration_samples", "leaderboard")
# measurements.json keys the core writes itself ("error" at the root fails every check)
RESERVED_SECTIONS = frozenset({"schema", "assignment", "environment", "execution", "error"})
SECTION_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class CalibrationContext:
    """What ``calibration_samples`` receives for one run of the reference solution."""

    assignment: Any  # the Assignment
    workspace: Path  # that run's working directory (its artifacts), kept until the call returns
    run: int  # 0, 1, … (the run's parameters are ``value + run``)
    measurements: dict[str, Any]  # that run's measurements.json


class GradingPlugin:
    """An assignment's ``grading`` package behind the checked interface described above."""

    def __init__(self, module: ModuleType, where: str) -> None:
        self.module = module
        self.where = where
        missing = [name for name in REQUIRED if not callable(getattr(module, name, None))]
        if missing:
            raise AssignmentError(
                f"{where} must define {' and '.join(f'{n}()' for n in missing)} (see docs/ADDING-AN-ASSIGNMENT.md)"
            )
        for name in OPTIONAL:
            hook = getattr(module, name, None)
            if hook is not None and not callable(hook):
                raise AssignmentError(f"{where}: {name} must be a function, not {type(hook).__name__}")
        self.prepare: Callable[[Any], None] | None = getattr(module, "prepare", None)
        self.measure_artifacts: Callable[[Any], Any] | None = getattr(module, "measure_artifacts", None)
        self.calibration_samples_hook = getattr(module, "calibration_samples", None)
        self.leaderboard_hook = getattr(module, "leaderboard", None)

    def __getattr__(self, name: str) -> Any:
        # only reached for names the plugin does not define: the package's own attributes
        if name == "module":
            raise AttributeError(name)
        return getattr(self.module, name)

    def __repr__(self) -> str:
        return f"GradingPlugin({self.where})"

    # ── the interface ────────────────────────────────────────────────────────────────────────

    def probe_cases(self) -> list[ProbeCase]:
        cases = self.module.probe_cases()
        if not isinstance(cases, (list, tuple)) or not all(isinstance(c, ProbeCase) for c in cases):
            raise AssignmentError(f"{self.where}: probe_cases() must return a list of ProbeCase, got {_kind(cases)}")
        ids = [c.id for c in cases]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})[:3]
            raise AssignmentError(f"{self.where}: probe case ids must be unique, repeated: {dup}")
        try:
            check_cases(list(cases))
        except ValueError as e:
            raise AssignmentError(f"{self.where}: {e}") from None
        return list(cases)

    def measure(self, ctx: Any) -> dict[str, Any]:
        return validate_sections(self.module.measure(ctx), f"{self.where}: measure(ctx)")

    def calibration_samples(self, ctx: CalibrationContext) -> list[dict[str, Any]]:
        if self.calibration_samples_hook is None:
            return []
        samples = self.calibration_samples_hook(ctx)
        if not isinstance(samples, (list, tuple)):
            raise AssignmentError(
                f"{self.where}: calibration_samples(ctx) must return a list of dicts, got {_kind(samples)}"
            )
        return [validate_sections(s, f"{self.where}: calibration_samples(ctx)[{i}]") for i, s in enumerate(samples)]

    def leaderboard(self, grade: dict[str, Any], measurements: dict[str, Any]) -> list[dict[str, Any]]:
        if self.leaderboard_hook is None:
            return []
        entries = list(self.leaderboard_hook(grade, measurements))
        for e in entries:
            if not isinstance(e, dict) or not isinstance(e.get("name"), str) or "value" not in e:
                raise AssignmentError(f"{self.where}: leaderboard() entries need a 'name' and a 'value', got {e!r:.80}")
        return entries


def validate_sections(sections: Any, where: str) -> dict[str, Any]:
    """``sections`` unchanged when it is a dict of plain-named dict sections none of which is reserved."""
    if not isinstance(sections, dict):
        raise AssignmentError(f"{where} must return a dict of sections, got {_kind(sections)}")
    for name, section in sections.items():
        if not isinstance(name, str) or not SECTION_NAME.match(name):
            raise AssignmentError(
                f"{where} returned a section named {name!r:.60}: section names are "
                "identifiers (letters, digits, _), since rubric paths are dotted"
            )
        if name in RESERVED_SECTIONS:
            raise AssignmentError(
                f"{where} returned a section '{name}', a name the core writes itself "
                f"(reserved: {', '.join(sorted(RESERVED_SECTIONS))}); rename it"
            )
        if not isinstance(section, dict):
            raise AssignmentError(
                f"{where} returned section '{name}' as {_kind(section)}: a section is a "
                'dict of facts, or {"error": "reason"} when nothing could be measured'
            )
    return sections


def load_plugin(package: Path, module_name: str) -> GradingPlugin:
    """Import ``package`` (a folder with ``__init__.py``) as ``module_name`` and check its interface."""
    import importlib.util
    import sys

    init = package / "__init__.py"
    if not init.is_file():
        raise AssignmentError(f"{init} is missing: an assignment needs a grading package")
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, init, submodule_search_locations=[str(package)])
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(module_name, None)
            raise
    return GradingPlugin(module, f"{package.parent.name}/grading")


def _kind(value: Any) -> str:
    return type(value).__name__
