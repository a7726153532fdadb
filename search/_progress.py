"""Progress of a search job that works everywhere: a live bar on a terminal, plain lines
elsewhere (a pipe, `search logs`, a cron log), so a job is never silent until it ends."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

__all__ = [
    "DEFAULT_EVERY_S", "eta_seconds", "format_duration", "job_progress", "progress_line",
]

# seconds between plain progress lines; LLMCAP_PROGRESS_EVERY overrides
DEFAULT_EVERY_S = 10.0


def eta_seconds(elapsed_s: float, done: int, total: int) -> float | None:
    """Seconds left at the pace so far (None before the first configuration finishes)."""
    if done <= 0 or total <= 0 or elapsed_s <= 0:
        return None
    return max(elapsed_s / done * (total - done), 0.0)


def format_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def progress_line(progress: Any, elapsed_s: float) -> str:
    """One line of a job's progress: done/total, running, failed, best so far, elapsed, ETA."""
    best = (
        f"{progress.best_qps_per_dollar:.3f} QPS per $/h ({progress.best_label})"
        if progress.best_label
        else "-"
    )
    eta = eta_seconds(elapsed_s, progress.done, progress.total)
    return (
        f"progress: {progress.done}/{progress.total or '?'} configurations, "
        f"{progress.running} running, {progress.failed} failed; best {best}; "
        f"elapsed {format_duration(elapsed_s)}, ETA {format_duration(eta)}"
    )


@contextmanager
def job_progress(console: Console, every_s: float | None = None) -> Iterator[Callable]:
    """A callback for `SearchDriver.on_progress`: a rich bar when `console` is a terminal,
    else a plain line at most every `every_s` seconds (and one at the end)."""
    if console.is_terminal:
        with _bar(console) as show:
            yield show
        return
    every = every_s if every_s is not None else float(
        os.environ.get("LLMCAP_PROGRESS_EVERY", DEFAULT_EVERY_S)
    )
    started = time.monotonic()
    state: dict[str, Any] = {"last": -math.inf, "progress": None}

    def show(progress: Any) -> None:
        state["progress"] = progress
        now = time.monotonic()
        if now - state["last"] >= every:
            state["last"] = now
            console.print(progress_line(progress, now - started), soft_wrap=True)

    try:
        yield show
    finally:
        if state["progress"] is not None:
            console.print(progress_line(state["progress"], time.monotonic() - started),
                          soft_wrap=True)  # fmt: skip


@contextmanager
def _bar(console: Console) -> Iterator[Callable]:
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("running {task.fields[running]}  failed {task.fields[failed]}"),
        TextColumn("best {task.fields[best]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("configurations", total=None, running=0, failed=0, best="-")

        def show(p: Any) -> None:
            best = f"{p.best_qps_per_dollar:.3f} QPS/$ ({p.best_label})" if p.best_label else "-"
            bar.update(
                task, total=p.total, completed=p.done, running=p.running, failed=p.failed, best=best
            )

        yield show
