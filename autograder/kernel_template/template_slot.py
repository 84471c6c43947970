"""A grading process's kernel templates: one per (sandbox slot, lesson), kept for the process's life.

Whoever grades in a slot (a local pool worker, a Dask worker's thread, ``grade`` with
``AUTOGRADER_KERNEL_TEMPLATE=1``) asks :func:`for_lesson` for the slot's template of the lesson
and hands it to :func:`~.execute.run_submission`, which decides per run whether it can be used
(:func:`~.template.unavailable_reason`) and otherwise starts a fresh kernel and says why.

- A template is started on first use, with the modules of the lesson's OWN notebooks' import-only
  cells (the student template and the reference solution: :func:`lesson_modules`), never a
  submission's.
- It is kept until the process ends, then killed and reaped by pid (:func:`close_all`, run at
  exit, also in a ``multiprocessing`` worker, which skips ``atexit``).
- If it dies it is started again once; after a second death (or a failed start) the slot uses
  fresh kernels for the rest of the process's life, and each run's execution.json says why.
"""

from __future__ import annotations

import atexit
import json
import multiprocessing.util
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from .template import KernelTemplate, enabled, import_only_modules

MAX_STARTS = 2  # the first start and one restart

_LOCK = threading.Lock()
_TEMPLATES: dict[tuple[int, str], SlotTemplate] = {}


def lesson_modules(notebooks: list[Path]) -> list[str]:
    """The modules a lesson's template imports: those of the import-only code cells of ``notebooks``
    (the lesson's own: its student template, its reference solution; a missing one is skipped)."""
    sources: list[str] = []
    for path in notebooks:
        try:
            cells = json.loads(Path(path).read_text(encoding="utf-8")).get("cells", [])
        except (OSError, ValueError, AttributeError):
            continue
        for cell in cells if isinstance(cells, list) else []:
            if isinstance(cell, dict) and cell.get("cell_type") == "code":
                source = cell.get("source", "")
                sources.append("".join(source) if isinstance(source, list) else str(source))
    return import_only_modules(sources)


class SlotTemplate:
    """The template of one (slot, lesson): started on first use, restarted once, then given up."""

    def __init__(self, slot: int, lesson: str, modules: list[str], folder: Path) -> None:
        self.slot = slot
        self.lesson = lesson
        self.modules = list(modules)
        self.folder = folder
        self.template: KernelTemplate | None = None
        self.starts = 0
        self.gave_up: str | None = None  # why this slot now uses fresh kernels
        self.lock = threading.Lock()

    def acquire(self) -> tuple[KernelTemplate | None, str | None]:
        """A live template (started or restarted now if need be), or None and why a fresh kernel is used."""
        with self.lock:
            if self.template is not None and self.template.alive():
                return self.template, None
            if self.template is not None:  # it died: reap it, and count the start it used
                self.template.stop()
                self.template = None
                if self.starts >= MAX_STARTS:
                    self.gave_up = (
                        f"the kernel template of this worker died {self.starts} times, so its remaining "
                        "submissions run in fresh kernels"
                    )
            if self.gave_up is not None:
                return None, self.gave_up
            self.starts += 1
            try:
                self.template = KernelTemplate(self.folder, self.modules).start()
            except Exception as e:  # noqa: BLE001 - a template that cannot start means fresh kernels, said so
                self.template = None
                self.gave_up = f"the kernel template could not be started ({type(e).__name__}: {str(e)[:200]})"
                return None, self.gave_up
            return self.template, None

    def died(self, template: KernelTemplate) -> bool:
        """True when ``template`` (handed out by :meth:`acquire`) is no longer running."""
        return not template.alive()

    @property
    def pid(self) -> int | None:
        """The running template's pid (None when none runs)."""
        t = self.template
        return t.proc.pid if t is not None and t.proc is not None and t.alive() else None

    def close(self) -> None:
        """Kill and reap the template by pid; its folder is removed."""
        with self.lock:
            if self.template is not None:
                self.template.stop()
                self.template = None
        shutil.rmtree(self.folder, ignore_errors=True)


def for_lesson(slot: int, assignment: Any) -> SlotTemplate:
    """This process's template for ``slot`` and ``assignment``'s lesson (made, not started, on first
    call). ``assignment``: an :class:`~autograder.assignment.Assignment` (its notebook and reference
    solution name the modules)."""
    key = (int(slot), str(assignment.id))
    with _LOCK:
        found = _TEMPLATES.get(key)
        if found is None:
            notebooks = [Path(assignment.notebook), Path(assignment.reference_folder) / "solution.ipynb"]
            folder = Path(tempfile.mkdtemp(prefix=f"autograder-template-{key[0]}-"))
            found = _TEMPLATES[key] = SlotTemplate(key[0], key[1], lesson_modules(notebooks), folder)
            _register_exit()
        return found


def for_run(slot: int, assignment: Any, asked: bool) -> SlotTemplate | None:
    """The template a run in ``slot`` may use: the lesson's when ``asked`` (a batch, unless
    ``--fresh-kernels``) or when ``AUTOGRADER_KERNEL_TEMPLATE=1`` forces it (``grade``,
    Gradescope, the tests); else None (a fresh kernel)."""
    return for_lesson(slot, assignment) if asked or enabled() else None


def running_pids() -> list[int]:
    """The pids of this process's running kernel templates (for accounting: the CPU budget)."""
    with _LOCK:
        found = list(_TEMPLATES.values())
    return [pid for pid in (slot_template.pid for slot_template in found) if pid is not None]


def close_all() -> None:
    """Kill and reap every template of this process (at its exit, and for tests)."""
    with _LOCK:
        found = list(_TEMPLATES.values())
        _TEMPLATES.clear()
    for slot_template in found:
        slot_template.close()


_REGISTERED: list[bool] = []


def _forget_after_fork() -> None:
    """A forked child owns none of its parent's templates (not its children): it starts its own."""
    global _LOCK
    _LOCK = threading.Lock()  # another thread may have held it at the fork
    _TEMPLATES.clear()
    _REGISTERED.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def _register_exit() -> None:
    if _REGISTERED:
        return
    _REGISTERED.append(True)
    atexit.register(close_all)
    # a multiprocessing worker leaves by os._exit after its finalizers: atexit does not run there
    multiprocessing.util.Finalize(None, close_all, exitpriority=100)
