"""The batch's progress: a bar on a terminal, and lines an instructor must not miss anywhere.

- The bar counts the whole class: a resumed batch starts at the submissions an earlier run
  finished (``done``), e.g. ``3/8``, not ``0/5``.
- Its ETA is the remaining submissions at this run's pace so far (elapsed / finished), so it
  grows while nothing finishes instead of standing still during a long timeout.
- A submission running past its expected time is named: on the bar (``still running: bob.ipynb
  4:10, expected ≤ 0:40``) and, once, as a line. Expected: ``LATE_FACTOR`` × the median time of
  this run's graded submissions (at least ``MIN_EXPECTED_S``), or ``FIRST_EXPECTED_S`` before any
  finished.
- ``note(message)``: one line on stderr (above the bar while it shows), for what the engines
  report: a worker lost, no worker left.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

LATE_FACTOR = 2.0
MIN_EXPECTED_S = 30.0
FIRST_EXPECTED_S = 180.0
NAME_CHARS = 32


def note(message: str, console: Any = None) -> None:
    """One line for the instructor on stderr; while a bar shows, rich prints it above the bar."""
    from rich.console import Console
    from rich.text import Text

    (console or Console(stderr=True)).print(Text(message, style="yellow"), soft_wrap=True)


def clock_text(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return (
        f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        if seconds >= 3600
        else f"{seconds // 60}:{seconds % 60:02d}"
    )


class ProgressBar:
    """A rich progress bar with a count of the whole class and an honest ETA on a terminal;
    without one (or with ``enabled`` False), only the lines of ``note`` and late submissions."""

    def __init__(
        self,
        enabled: bool,
        total: int,
        where: str,
        console: Any = None,
        *,
        done: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self.enabled = enabled and self.console.is_terminal
        self.total, self.where, self.clock = total, where, clock
        self.finished = done  # the whole class's count, earlier runs included
        self.began = clock()
        self.done_here = 0  # finished by this run
        self.running: dict[str, float] = {}  # name → when its job was sent to a worker
        self.durations: list[float] = []  # of this run's graded (not cached) submissions
        self.told: set[str] = set()  # late submissions already named in a line
        self.last = ""

    def __enter__(self) -> ProgressBar:
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            self.progress = Progress(
                SpinnerColumn(),
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA {task.fields[eta]}"),
                console=self.console,
            )
            self.progress.__enter__()
            self.task = self.progress.add_task(
                f"grading on {self.where}", total=self.total, completed=self.finished, eta=self.eta()
            )
        return self

    # ── events from the dispatcher ──────────────────────────────────────────────────────────

    def started(self, name: str) -> None:
        """A submission's job was sent to a worker."""
        self.running[str(name)] = self.clock()

    def done(self, record: dict[str, Any]) -> None:
        name = str(record.get("name", "?"))
        began = self.running.pop(name, None)
        if began is not None and not record.get("cached"):
            self.durations.append(self.clock() - began)
        self.finished += 1
        self.done_here += 1
        how = "cached" if record.get("cached") else record.get("status", "?")
        self.last = f"{name[:NAME_CHARS]}: {how}"
        self._show(advance=1)

    def tick(self) -> None:
        """About once a second: the ETA, and whichever submission runs past its expected time."""
        late = self.late()
        for name, seconds in late:
            if name not in self.told:
                self.told.add(name)
                note(
                    f"still running: {name} for {clock_text(seconds)}, past the expected "
                    f"≤ {clock_text(self.expected_s())} (a long timeout, or a slow notebook)",
                    self.console,
                )
        self._show()

    # ── what is shown ───────────────────────────────────────────────────────────────────────

    def expected_s(self) -> float:
        if not self.durations:
            return FIRST_EXPECTED_S
        return max(MIN_EXPECTED_S, LATE_FACTOR * statistics.median(self.durations))

    def late(self) -> list[tuple[str, float]]:
        """The submissions running past their expected time, longest first: (name, seconds)."""
        now, limit = self.clock(), self.expected_s()
        return sorted(((n, now - t) for n, t in self.running.items() if now - t > limit), key=lambda x: -x[1])

    def eta(self) -> str:
        """The remaining submissions at this run's pace so far; '?' before the first finishes."""
        remaining = self.total - self.finished
        if remaining <= 0:
            return "0:00"
        if not self.done_here:
            return "?"
        return clock_text(remaining * (self.clock() - self.began) / self.done_here)

    def description(self) -> str:
        late = self.late()
        if late:
            name, seconds = late[0]
            more = f" (+{len(late) - 1} more)" if len(late) > 1 else ""
            return (
                f"still running: {name[:NAME_CHARS]} {clock_text(seconds)}, expected "
                f"≤ {clock_text(self.expected_s())}{more}"
            )
        return self.last or f"grading on {self.where}"

    def _show(self, advance: int = 0) -> None:
        if self.enabled:
            self.progress.update(self.task, advance=advance, description=self.description(), eta=self.eta())

    def __exit__(self, *exc: Any) -> None:
        if self.enabled:
            self.progress.__exit__(*exc)
