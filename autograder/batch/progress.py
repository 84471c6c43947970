"""The batch's progress: a bar on a terminal, and lines an instructor must not miss anywhere.

- The bar counts the whole class: a resumed batch starts at the submissions an earlier run
  finished (``done``), e.g. ``3/8``, not ``0/5``.
- Its ETA is the remaining submissions at this run's pace so far (elapsed / finished), so it
  grows while nothing finishes instead of standing still during a long timeout; while a submission
  runs past its expected time it is a lower bound (``≥ 0:34``), and never less than what that
  submission may still take within its time limit (``limit_s``, the notebook's).
- A submission running past its expected time is named: on the bar (``still running: bob.ipynb
  4:10, expected ≤ 0:40``) and, once, as a line, only once the times shown differ. Expected:
  ``LATE_FACTOR`` × the median time of this run's graded submissions (at least
  ``MIN_EXPECTED_S``), or ``FIRST_EXPECTED_S`` before any finished; fixed for a submission once it
  was named late, so the time it was told against does not jump while it runs on.
- ``note(message)``: one line on stderr (above the bar while it shows), for what the engines
  report: a worker lost, no worker left.
"""

from __future__ import annotations

import math
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
        limit_s: float | None = None,
    ) -> None:
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self.enabled = enabled and self.console.is_terminal
        self.total, self.where, self.clock = total, where, clock
        self.finished = done  # the whole class's count, earlier runs included
        self.began = clock()
        self.done_here = 0  # finished by this run
        self.running: dict[str, float] = {}  # name → when its job was sent to a worker
        self.expected: dict[str, float] = {}  # name → its expected time, fixed once it was named late
        self.limit_s = limit_s  # how long one submission may take at most, when known
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
        self.expected.pop(name, None)
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
                self.expected[name] = self.expected_of(name)  # what it was told against stays
                note(
                    f"still running: {name} for {clock_text(seconds)}, past the expected "
                    f"≤ {clock_text(self.expected_of(name))} (a long timeout, or a slow notebook)",
                    self.console,
                )
        self._show()

    def expected_of(self, name: str) -> float:
        return self.expected.get(name, self.expected_s())

    # ── what is shown ───────────────────────────────────────────────────────────────────────

    def expected_s(self) -> float:
        if not self.durations:
            return FIRST_EXPECTED_S
        return max(MIN_EXPECTED_S, LATE_FACTOR * statistics.median(self.durations))

    def late(self) -> list[tuple[str, float]]:
        """The submissions running past their expected time as shown (whole seconds: never "1:19,
        expected ≤ 1:19"), longest first: (name, seconds)."""
        now = self.clock()
        return sorted(
            ((n, now - t) for n, t in self.running.items() if int(now - t) > math.ceil(self.expected_of(n))),
            key=lambda x: -x[1],
        )

    def eta(self) -> str:
        """The remaining submissions at this run's pace so far; '?' before the first finishes; a
        lower bound ("≥ …") while a submission runs late, at least what it may still take."""
        remaining = self.total - self.finished
        if remaining <= 0:
            return "0:00"
        late = self.late()
        floor = 0.0
        if late and self.limit_s is not None:
            floor = max(0.0, self.limit_s - late[0][1])
        if not self.done_here:
            return f"≥ {clock_text(floor)}" if floor else "?"
        pace = remaining * (self.clock() - self.began) / self.done_here
        return f"≥ {clock_text(max(pace, floor))}" if late else clock_text(pace)

    def description(self) -> str:
        late = self.late()
        if late:
            name, seconds = late[0]
            more = f" (+{len(late) - 1} more)" if len(late) > 1 else ""
            return (
                f"still running: {name[:NAME_CHARS]} {clock_text(seconds)}, expected "
                f"≤ {clock_text(self.expected_of(name))}{more}"
            )
        return self.last or f"grading on {self.where}"

    def _show(self, advance: int = 0) -> None:
        if self.enabled:
            self.progress.update(self.task, advance=advance, description=self.description(), eta=self.eta())

    def __exit__(self, *exc: Any) -> None:
        if self.enabled:
            self.progress.__exit__(*exc)
