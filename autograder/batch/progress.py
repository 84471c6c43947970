"""The batch's progress bar: count, elapsed time and ETA on a terminal; silent otherwise."""

from __future__ import annotations

from typing import Any


class ProgressBar:
    """A rich progress bar with ETA on a terminal; silent otherwise."""

    def __init__(self, enabled: bool, total: int, where: str, console: Any = None) -> None:
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self.enabled = enabled and self.console.is_terminal
        self.total, self.where = total, where

    def __enter__(self) -> ProgressBar:
        if self.enabled:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self.progress = Progress(SpinnerColumn(), TextColumn("[bold]{task.description}"),
                                     BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                                     TimeRemainingColumn(), console=self.console)
            self.progress.__enter__()
            self.task = self.progress.add_task(f"grading on {self.where}", total=self.total)
        return self

    def done(self, record: dict[str, Any]) -> None:
        if self.enabled:
            how = "cached" if record.get("cached") else record.get("status", "?")
            self.progress.update(self.task, advance=1, description=f"{str(record.get('name', '?'))[:32]}: {how}")

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.progress.__exit__(*exc)
