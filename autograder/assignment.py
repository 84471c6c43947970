"""Find and load an assignment: its config, rubric, tolerances and grading plugin.

An assignment is two folders:

- ``assignments/<id>/``: ``assignment.toml`` (config), the student notebook, ``rubric.toml``,
  ``README.md``, ``examples/`` and ``grading/`` (a Python package of trusted, assignment-specific
  measurement code exposing ``probe_cases(assignment)`` and ``measure(ctx)``);
- ``reference/<id>/``: the master and solution notebooks and ``tolerances.toml``.

A second lesson is a new pair of folders; nothing in the core names an assignment.
The project root is ``$AUTOGRADER_ROOT`` when set, else the checkout this package lives in.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

from .errors import AssignmentError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

DEFAULT_ASSIGNMENT = "07-quantization"


def project_root() -> Path:
    env = os.environ.get("AUTOGRADER_ROOT")
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve().parent.parent
    if (here / "assignments").is_dir():
        return here
    return Path.cwd()


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


@dataclass(frozen=True)
class ExecutionLimits:
    """Time and resource limits for one submission, from ``[execution]`` in assignment.toml."""

    cell_timeout_s: float = 120.0
    notebook_timeout_s: float = 600.0
    memory_mb: int = 4096
    output_cap_kb: int = 1024
    workspace_mb: int = 256        # total size of the working directory (a capped tmpfs, or a watchdog)


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

    @cached_property
    def grading(self) -> ModuleType:
        """The assignment's trusted grading package (``assignments/<id>/grading``)."""
        pkg = self.folder / "grading"
        init = pkg / "__init__.py"
        if not init.is_file():
            raise AssignmentError(f"{init} is missing: an assignment needs a grading package")
        name = "autograder_assignment_" + "".join(ch if ch.isalnum() else "_" for ch in self.id)
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(pkg)])
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    def fingerprint(self) -> str:
        """A hash of everything that changes how a notebook is executed and measured.

        Part of the cache key: a new version of the grading code or config re-executes work.
        The rubric and tolerances are not in it, since rescoring needs no execution.
        """
        h = hashlib.sha256()
        h.update(self.id.encode())
        h.update(self.version.encode())
        files = [self.folder / "assignment.toml"] + sorted((self.folder / "grading").rglob("*.py"))
        for f in files:
            h.update(f.relative_to(self.folder).as_posix().encode())
            h.update(f.read_bytes())
        return h.hexdigest()[:16]


def load_assignment(assignment_id: str = DEFAULT_ASSIGNMENT, root: Path | None = None) -> Assignment:
    root = root or project_root()
    folder = root / "assignments" / assignment_id
    if not folder.is_dir():
        known = sorted(p.name for p in (root / "assignments").glob("*") if p.is_dir())
        raise AssignmentError(f"no assignment '{assignment_id}' under {root / 'assignments'} (known: {', '.join(known) or 'none'})")
    config = load_toml(folder / "assignment.toml")
    return Assignment(id=assignment_id, folder=folder, reference_folder=root / "reference" / assignment_id, config=config)
