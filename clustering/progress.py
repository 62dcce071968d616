"""A rich progress display for long clustering runs: one bar per stage, with its time."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn


class RichStageProgress:
    """Use as ``with RichStageProgress() as progress: pipeline = IssuePipeline(..., progress=progress)``."""

    def __init__(self, console: Console | None = None):
        self._progress = Progress(
            TextColumn("{task.description:<10}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[seconds]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self._tasks: dict[str, TaskID] = {}
        self.timings: dict[str, float] = {}

    def __enter__(self) -> RichStageProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()

    def __call__(self, stage: str, done: int, total: int, seconds: float) -> None:
        if stage not in self._tasks:
            self._tasks[stage] = self._progress.add_task(stage, total=max(total, 1), seconds="")
        task = self._tasks[stage]
        finished = seconds > 0 or (done == total and done > 0)
        if finished and seconds > 0:
            self.timings[stage] = seconds
        self._progress.update(
            task,
            total=max(total, 1),
            completed=max(done, 1 if finished else 0),
            seconds=f"{seconds:.2f}s" if seconds > 0 else "",
        )
