"""The `vidur-ops` report: held-out operator errors by group, GPU and model, and the
leave-one-GPU-out and leave-one-model-out folds."""

from __future__ import annotations

import math
from collections.abc import Sequence

import click
import pandas as pd
from rich.console import Console
from rich.table import Table

from search._validate._report import _line, _pct
from search._validate._stats import ErrorStats, error_stats
from search._validate._vidur_ops import GROUPS, TARGETS, Fold, VidurOpsResult


def frame_stats(df: pd.DataFrame) -> ErrorStats:
    return error_stats(df["predicted"].to_numpy(), df["measured"].to_numpy())


def headline(scored: pd.DataFrame) -> dict[str, ErrorStats]:
    """Held-out statistics of the two targeted groups: matmul and attention (both phases)."""
    attention = scored["group"].str.startswith("attention")
    return {
        "matmul": frame_stats(scored[scored["group"] == "matmul"]),
        "attention": frame_stats(scored[attention]),
    }


def _mape(stats: ErrorStats) -> str:
    return "-" if math.isnan(stats.mape) else f"{stats.mape * 100:.1f}%"


def print_vidur_ops(result: VidurOpsResult, console: Console | None = None) -> None:
    """`matmul MAPE x%` and `attention MAPE y%` with their targets, then the tables."""
    console = console or Console()
    held = result.held_out
    _headlines(held.scored, "")
    console.print(_group_table(held.scored))
    if result.held_out_profiled is not None and not result.held_out_profiled.empty:
        click.echo(
            "profiled backend on the same held-out rows (op tables of the other rows, "
            "interpolated):"
        )
        _headlines(result.held_out_profiled, "  ")
        console.print(
            _group_table(result.held_out_profiled, "profiled backend: held-out rows by group")
        )
    console.print(_matrix(held.scored, "gpu", "held-out rows by GPU (MAPE)"))
    with_model = held.scored[held.scored["model"] != ""]
    console.print(_matrix(with_model, "model", "held-out rows by model (MAPE)"))
    if result.leave_gpu_out:
        console.print(_folds(result.leave_gpu_out, "leave one GPU out (MAPE of its rows)"))
        click.echo(
            "  a left-out GPU is predicted as an unmeasured one: its family's constants "
            "(fitted on the other GPU of the family) or, where none, the defaults; "
            "attention tables exist for the A100 only, so without it attention keeps "
            "its unfitted starting constants"
        )
    if result.leave_model_out:
        console.print(_folds(result.leave_model_out, "leave one model out (MAPE of its rows)"))


def _headlines(scored: pd.DataFrame, indent: str) -> None:
    for name, stats in headline(scored).items():
        target = TARGETS[name]
        verdict = "met" if stats.mape <= target else "not met"
        click.echo(f"{indent}{_line(name, stats)}  target <= {target:.0%}: {verdict}")


def _group_table(scored: pd.DataFrame, title: str = "held-out rows by operator group") -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("group", "times", "MAPE", "median signed", "within ±10%"):
        table.add_column(column, justify="left" if column == "group" else "right")
    for group in _present(scored):
        stats = frame_stats(scored[scored["group"] == group])
        table.add_row(
            group, str(stats.n), _mape(stats), _pct(stats.median_signed, True),
            _pct(stats.within),
        )  # fmt: skip
    return table


def _present(scored: pd.DataFrame) -> list[str]:
    have = set(scored["group"])
    return [g for g in GROUPS if g in have]


def _matrix(scored: pd.DataFrame, by: str, title: str) -> Table:
    """One row per value of column `by`, one MAPE column per operator group."""
    groups = _present(scored)
    table = Table(title=title, title_justify="left")
    table.add_column(by, style="bold")
    table.add_column("times", justify="right")
    for group in groups:
        table.add_column(group, justify="right")
    for name, rows in scored.groupby(by, sort=True):
        cells = [_mape(frame_stats(rows[rows["group"] == g])) for g in groups]
        table.add_row(str(name), str(len(rows)), *cells)
    return table


def _folds(folds: Sequence[Fold], title: str) -> Table:
    groups = [g for g in GROUPS if any(g in set(f.scored["group"]) for f in folds)]
    table = Table(title=title, title_justify="left")
    table.add_column("left out", style="bold")
    table.add_column("fit rows", justify="right")
    table.add_column("held-out rows", justify="right")
    for group in groups:
        table.add_column(group, justify="right")
    for fold in folds:
        cells = [_mape(frame_stats(fold.scored[fold.scored["group"] == g])) for g in groups]
        name = fold.name.rsplit("/", 1)[-1]
        table.add_row(name, str(fold.fit_rows), str(fold.held_rows), *cells)
    return table
