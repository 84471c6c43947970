"""Find and load an assignment: its config, rubric, tolerances and grading plugin.

An assignment is two folders:

- ``assignments/<id>/``: ``assignment.toml`` (config), the student notebook, ``rubric.toml``,
  ``README.md``, ``examples/`` and ``grading/`` (a Python package of trusted, assignment-specific
  measurement code behind the interface of :mod:`autograder.grading_plugin`);
- ``reference/<id>/``: the solution (and an otter-assign master, if any), ``tolerances.toml``.

A second lesson is a new pair of folders; nothing in the core names an assignment, and there is
no default one: :mod:`autograder.assignment_match` decides which assignment a command or a
notebook is for. The project root is ``$AUTOGRADER_ROOT`` when set, else the checkout this
package lives in. docs/ADDING-AN-ASSIGNMENT.md walks through adding one.
"""

from __future__ import annotations

import copy
import hashlib
import os
import tomllib
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from . import contracts, hidden_secret, redact
from .environment import environment_fingerprint, environment_versions
from .errors import AssignmentError
from .grading_plugin import GradingPlugin, load_plugin
from .limits import ExecutionLimits as ExecutionLimits  # its home is limits.py; named here for older importers
from .measure.model_policy import ModelPolicy, policy_from_table
from .project import project_root as project_root
from .rubric import validate_rubric


def load_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file; parsed once per content version (rescoring reads the same rubric and
    tolerances for every submission). The caller gets its own copy."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise AssignmentError(f"{path} is missing") from None
    return copy.deepcopy(_parse_toml(str(path), st.st_mtime_ns, st.st_size))


@lru_cache(maxsize=32)
def _parse_toml(path: str, _mtime_ns: int, _size: int) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise AssignmentError(f"{path} is missing") from None
    except tomllib.TOMLDecodeError as e:
        raise AssignmentError(f"{path} is not valid TOML: {e}") from None


@dataclass
class Assignment:
    id: str
    folder: Path
    reference_folder: Path
    config: dict[str, Any] = field(repr=False)

    @property
    def title(self) -> str:
        return str(self.config.get("title", self.id))

    @property
    def version(self) -> str:
        return str(self.config.get("version", "0"))

    @property
    def notebook(self) -> Path:
        return self.folder / self.config.get("notebook", f"{self.id}.ipynb")

    @property
    def results_variable(self) -> str:
        return str(self.config.get("probe", {}).get("results_variable", "RESULTS"))

    @property
    def artifacts(self) -> dict[str, str]:
        return dict(self.config.get("artifacts", {}))

    @property
    def limits(self) -> ExecutionLimits:
        return ExecutionLimits(**self.config.get("execution", {}))

    @cached_property
    def model_policy(self) -> ModelPolicy:
        """What the model worker accepts and how it runs this lesson's models (``[model_worker]``,
        validated when the assignment loads; see :mod:`autograder.measure.model_policy`)."""
        return policy_from_table(self.config.get("model_worker", {}), str(self.folder / "assignment.toml"))

    @property
    def rubric_path(self) -> Path:
        return self.folder / "rubric.toml"

    @property
    def tolerances_path(self) -> Path:
        return self.reference_folder / "tolerances.toml"

    def rubric(self, path: Path | None = None) -> dict[str, Any]:
        return load_toml(path or self.rubric_path)

    def tolerances(self, override: Path | None = None) -> dict[str, Any]:
        """The calibrated tolerances, with the keys of an instructor's ``override`` file replaced
        (see ``autograder.tolerances``). Without a calibrated file the override is taken whole."""
        from .tolerances import merge_tolerances

        if override is None:
            return load_toml(self.tolerances_path)
        if not self.tolerances_path.is_file():
            return load_toml(override)
        return merge_tolerances(load_toml(self.tolerances_path), load_toml(override), source=str(override))

    def check_grading(self, tolerances: Path | None = None, rubric: Path | None = None) -> None:
        """The rubric (this assignment's, or ``rubric``) and the tolerances (merged with the
        ``tolerances`` override) parse and agree: every tolerance a rubric part names exists.
        Raises ``AssignmentError`` naming the file and the key at fault (instructor input, checked
        by every front end before any submission is graded). A lesson not calibrated since its
        rubric named a tolerance says so in one line (:meth:`uncalibrated`)."""
        loaded = self.rubric(rubric)
        if tolerances is None:
            note = self.uncalibrated(loaded)
            if note is not None:
                raise AssignmentError(note)
        validate_rubric(loaded, self.tolerances(tolerances))

    def rubric_sha256(self) -> str:
        """The SHA-256 of rubric.toml's bytes (what ``calibrate`` records beside the code's fingerprint)."""
        return hashlib.sha256(self.rubric_path.read_bytes()).hexdigest()

    def calibration_drift(self) -> str | None:
        """One line when ``tolerances.toml`` is older than the lesson's rubric or grading code (the
        values may no longer follow from the reference's runs), else None; a lesson never calibrated
        says so (:meth:`uncalibrated`). By the content hashes ``[provenance]`` records; by
        modification time where it records none (a git checkout resets modification times, so that
        fallback may warn about a file that is current)."""
        note = self.uncalibrated()
        path = self.tolerances_path
        if note is not None or not path.is_file():
            return note
        prov = self.tolerances().get("provenance", {})
        prov = prov if isinstance(prov, dict) else {}
        calibrated_at = path.stat().st_mtime
        grading = self.folder / "grading"
        code_files = [self.folder / "assignment.toml"] + [
            f for f in grading.rglob("*") if f.is_file() and "__pycache__" not in f.relative_to(grading).parts
        ]
        older_than: list[str] = []
        if "rubric_sha256" in prov:
            if prov["rubric_sha256"] != self.rubric_sha256():
                older_than.append("rubric.toml (by content)")
        elif self.rubric_path.stat().st_mtime > calibrated_at:
            older_than.append("rubric.toml (by modification time)")
        if "assignment_fingerprint" in prov:
            if prov["assignment_fingerprint"] != self.code_fingerprint():
                older_than.append("the grading code (grading/, assignment.toml; by content)")
        elif any(f.stat().st_mtime > calibrated_at for f in code_files):
            older_than.append("the grading code (grading/, assignment.toml; by modification time)")
        if not older_than:
            return None
        return (
            f"{path} is older than {' and '.join(older_than)}: its values may not follow from the "
            f"lesson as it is; run `autograder calibrate {self.id}` before you upload"
        )

    def uncalibrated(self, rubric: dict[str, Any] | None = None) -> str | None:
        """One line naming the lesson and ``autograder calibrate <id>`` when tolerances.toml is
        missing or lacks a tolerance the rubric (this assignment's, or ``rubric``) names; else None."""
        from .dotted import lookup

        rubric = self.rubric() if rubric is None else rubric
        keys = [
            part["tolerance"]
            for check in rubric.get("checks", [])
            if isinstance(check, dict)
            for part in check.get("parts", [])
            if isinstance(part, dict) and isinstance(part.get("tolerance"), str)
        ]
        if not keys:
            return None
        fix = f"run `autograder calibrate {self.id}`"
        if not self.tolerances_path.is_file():
            return f"assignment '{self.id}' was never calibrated ({self.tolerances_path} is missing): {fix}"
        tolerances = self.tolerances()
        for key in keys:
            value, reason = lookup(tolerances, key)
            if reason is not None or (isinstance(value, dict) and "value" not in value):
                return (
                    f"assignment '{self.id}': tolerance '{key}' is not a value in {self.tolerances_path} "
                    f"(not calibrated since the rubric named it): {fix}"
                )
        return None

    @property
    def packages(self) -> tuple[str, ...]:
        """Python packages whose versions change this assignment's grades (``[environment]
        packages``), recorded beside the core's own in every measurement and cache key."""
        packages = self.config.get("environment", {}).get("packages", [])
        if not isinstance(packages, list) or not all(isinstance(p, str) for p in packages):
            raise AssignmentError(f"{self.folder / 'assignment.toml'}: [environment] packages must be a list of names")
        return tuple(packages)

    def environment(self) -> dict[str, str]:
        """Versions of everything that changes a grade of this assignment (see autograder.environment)."""
        return environment_versions(self.packages)

    def environment_fingerprint(self) -> str:
        return environment_fingerprint(self.packages)

    @cached_property
    def grading(self) -> GradingPlugin:
        """The assignment's trusted grading package (``assignments/<id>/grading``), its interface checked."""
        name = "autograder_assignment_" + "".join(ch if ch.isalnum() else "_" for ch in self.id)
        return load_plugin(self.folder / "grading", name)

    def fingerprint(self) -> str:
        """A hash of everything that changes how a notebook is executed and measured: the grading
        code and config (:meth:`code_fingerprint`), the hidden-data secret's fingerprint and how
        hidden inputs are drawn (``hidden_secret.DRAWS``: per submission).

        Part of the cache key: a new version of the grading code or config, or a rotated secret
        (new hidden data), re-executes work. The rubric and tolerances are not in it, since
        rescoring needs no execution.
        """
        both = f"{self.code_fingerprint()}\nhidden_secret={hidden_secret.fingerprint()}\ndraws={hidden_secret.DRAWS}"
        return hashlib.sha256(both.encode()).hexdigest()[:16]

    def code_fingerprint(self) -> str:
        """A hash of the assignment's config and every file of its grading package (what ``calibrate`` records)."""
        h = hashlib.sha256()
        h.update(self.id.encode())
        h.update(self.version.encode())
        # every file of the grading package, data files included (a model or a table shipped beside
        # the code changes grades as surely as the code does); only Python's bytecode caches are not
        grading = self.folder / "grading"
        files = [self.folder / "assignment.toml"] + sorted(
            f for f in grading.rglob("*") if f.is_file() and "__pycache__" not in f.relative_to(grading).parts
        )
        for f in files:
            h.update(f.relative_to(self.folder).as_posix().encode())
            h.update(f.read_bytes())
        return h.hexdigest()[:16]


def check_config(config: dict[str, Any], path: Path) -> None:
    """``AssignmentError`` naming the file and the key unless ``config`` fits the assignment
    schema (``autograder/schemas/assignment.schema.json``): a misspelt ``[execution]`` key fails
    here, not as a ``TypeError`` when the limits are first read."""
    try:
        contracts.validate("assignment", config, str(path))
    except contracts.ContractError as e:  # instructor input: loudly, with the key
        raise AssignmentError(str(e)) from None


def assignment_ids(root: Path | None = None) -> list[str]:
    """The assignments of a project: every folder under ``assignments/`` with an assignment.toml."""
    folder = (root or project_root()) / "assignments"
    return sorted(p.name for p in folder.glob("*") if (p / "assignment.toml").is_file())


def load_assignment(assignment_id: str, root: Path | None = None) -> Assignment:
    root = root or project_root()
    folder = root / "assignments" / assignment_id
    if not assignment_id or "/" in assignment_id or assignment_id.startswith(".") or not folder.is_dir():
        known = assignment_ids(root)
        raise AssignmentError(
            f"no assignment {assignment_id!r} under {root / 'assignments'} (known: {', '.join(known) or 'none'})"
        )
    config = load_toml(folder / "assignment.toml")
    check_config(config, folder / "assignment.toml")
    # where the grader's assignments and hidden reference data live is the grader's path too: a
    # notebook that finds it (the fallback jail cannot hide /proc/self/mountinfo) gets <grader>
    redact.register(root)
    assignment = Assignment(
        id=assignment_id, folder=folder, reference_folder=root / "reference" / assignment_id, config=config
    )
    assignment.model_policy  # noqa: B018 - a bad [model_worker] table fails here, naming the key
    return assignment
