"""The error table, the per-point CSV and the predicted-vs-measured plot."""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from search._validate._aic_silicon import ValidationPoint
from search._validate._run import PointResult
from search._validate._stats import (
    ErrorStats,
    best_single_value_mape,
    concurrency_band,
    error_stats,
    grouped,
)

# the third metric's name: the closed loop's request throughput (`ToolStats.throughput`)
THROUGHPUT = "Throughput (req/s at the measured concurrency)"

GROUPS: tuple[tuple[str, Callable[[PointResult], str]], ...] = (
    ("engine", lambda r: r.point.engine),
    ("GPU", lambda r: r.point.sku),
    ("model", lambda r: r.point.model.rsplit("/", 1)[-1]),
    ("concurrency", lambda r: concurrency_band(r.point.concurrency)),
    # the listed prompt and output lengths (`ValidationPoint.isl` / `osl`)
    ("lengths", lambda r: f"{r.point.isl}/{r.point.osl}"),
    # which measurement campaign (its client and lengths: `ValidationPoint.source`)
    ("campaign", lambda r: r.point.source),
    # the measured checkpoint's weights (fp8, fp4, bf16 + mxfp4 experts, ...)
    ("weights", lambda r: r.point.weights),
    # whether the client warmed the server up before timing (`ValidationPoint.client_warmup`)
    ("client warm-up", lambda r: r.point.client_warmup or "not recorded"),
    # how busy the simulated prefill pool was (`PointResult.predicted_prefill_busy`)
    ("simulated prefill load", lambda r: prefill_load_band(r.predicted_prefill_busy)),
)
# tables shown only where their key varies
_SHOWN_WHEN_MIXED = ("lengths", "campaign", "weights", "client warm-up", "simulated prefill load")
# (upper bound, label): labels that sort in order, as the group tables sort their rows
PREFILL_LOAD_BANDS = ((0.5, "0-50%"), (0.8, "50-80%"), (0.95, "80-95%"), (math.inf, "95-100%"))


def prefill_load_band(busy: float) -> str:
    """The band of a disaggregated point's simulated prefill-pool busy share; "aggregated"
    where it has no prefill pool."""
    if math.isnan(busy):
        return "aggregated"
    return next(label for bound, label in PREFILL_LOAD_BANDS if busy <= bound)


@dataclass(frozen=True, slots=True)
class ToolStats:
    tpot: ErrorStats
    ttft: ErrorStats
    # the closed loop's request throughput both imply (`ValidationPoint.requests_per_second`):
    # the capacity at the measured concurrency, which a search ranks deployments by
    throughput: ErrorStats


def llmcap_stats(results: Sequence[PointResult]) -> ToolStats:
    return _tool_stats(results, lambda r: (r.predicted_ttft_ms, r.predicted_tpot_ms))


def aic_stats(results: Sequence[PointResult]) -> ToolStats:
    return _tool_stats(results, lambda r: (r.aic_ttft_ms, r.aic_tpot_ms))


def _tool_stats(
    results: Sequence[PointResult], predicted: Callable[[PointResult], tuple[float, float]]
) -> ToolStats:
    """A tool's errors on `results`, its (TTFT, TPOT) of each point from `predicted`."""
    pairs = [predicted(r) for r in results]
    points = [r.point for r in results]
    return ToolStats(
        tpot=error_stats([tpot for _, tpot in pairs], [p.measured_tpot_ms for p in points]),
        ttft=error_stats([ttft for ttft, _ in pairs], [p.measured_ttft_ms for p in points]),
        throughput=error_stats(
            [p.requests_per_second(*pair) for p, pair in zip(points, pairs, strict=True)],
            [p.measured_requests_per_second for p in points],
        ),
    )


@dataclass(frozen=True, slots=True)
class RepeatFloor:
    """The points whose deployment was measured more than once (`ValidationPoint.deployment`):
    the simulator gives each such deployment one answer, so on them no prediction scores
    below each deployment's best single value against its own measurements."""

    points: int
    deployments: int
    ttft: float  # MAPE of each deployment's best single TTFT against its measurements
    tpot: float
    throughput: float
    ours: ToolStats  # llmcap's errors on the same points


def repeat_floor(results: Sequence[PointResult]) -> RepeatFloor | None:
    """The floor of the points measured more than once, or None where none is."""
    by_deployment: dict[ValidationPoint, list[PointResult]] = {}
    for result in results:
        by_deployment.setdefault(result.point.deployment, []).append(result)
    repeated = [group for group in by_deployment.values() if len(group) > 1]
    if not repeated:
        return None
    members = [r for group in repeated for r in group]

    def floor(measure: Callable[[ValidationPoint], float]) -> float:
        total = sum(best_single_value_mape([measure(r.point) for r in group]) * len(group)
                    for group in repeated)  # fmt: skip
        return total / len(members)

    return RepeatFloor(
        points=len(members),
        deployments=len(repeated),
        ttft=floor(lambda p: p.measured_ttft_ms),
        tpot=floor(lambda p: p.measured_tpot_ms),
        throughput=floor(lambda p: p.measured_requests_per_second),
        ours=llmcap_stats(members),
    )


def _pct(value: float, signed: bool = False) -> str:
    if math.isnan(value):
        return "-"
    return f"{value * 100:+.0f}%" if signed else f"{value * 100:.0f}%"


def _line(name: str, stats: ErrorStats) -> str:
    return (
        f"{name} MAPE {stats.mape * 100:.1f}%  (median signed {_pct(stats.median_signed, True)}, "
        f"within ±10%: {_pct(stats.within)}, n={stats.n})"
    )


def print_report(
    results: Sequence[PointResult], *, with_aic: bool, console: Console | None = None
) -> None:
    """Overall lines `TPOT MAPE x%` and `TTFT MAPE y%`, then one table per grouping."""
    console = console or Console()
    ok = [r for r in results if r.ok]
    overall = llmcap_stats(ok)
    click.echo(_line("TPOT", overall.tpot))
    click.echo(_line("TTFT", overall.ttft))
    click.echo(_line(THROUGHPUT, overall.throughput))
    repeats = repeat_floor(ok)
    if repeats is not None:
        click.echo(
            f"  repeat measurements: {repeats.points} points measure {repeats.deployments} "
            f"deployment{'s' if repeats.deployments > 1 else ''} more than once; one "
            f"deployment's runs differ by TTFT MAPE "
            f"{repeats.ttft * 100:.1f}%, TPOT {repeats.tpot * 100:.1f}%, throughput "
            f"{repeats.throughput * 100:.1f}% around their best single value, a floor no "
            f"prediction beats there (llmcap there: TTFT {repeats.ours.ttft.mape * 100:.1f}%, "
            f"TPOT {repeats.ours.tpot.mape * 100:.1f}%, "
            f"throughput {repeats.ours.throughput.mape * 100:.1f}%)"
        )
    four_bit = [r for r in ok if r.point.four_bit]
    if four_bit and len(four_bit) < len(ok):  # 4-bit rows apart, so they move no headline
        for name, part in (("without 4-bit weights", [r for r in ok if not r.point.four_bit]),
                           ("4-bit weights (fp4, mxfp4, int4)", four_bit)):  # fmt: skip
            stats = llmcap_stats(part)
            click.echo(
                f"  {name} (n={stats.tpot.n}): TPOT MAPE {stats.tpot.mape * 100:.1f}%, "
                f"TTFT MAPE {stats.ttft.mape * 100:.1f}%"
            )
    both = [r for r in ok if not r.aic_error]
    if with_aic and both:
        theirs = aic_stats(both)
        ours = llmcap_stats(both)
        click.echo(
            f"on the {len(both)} points both tools answer: "
            f"llmcap TPOT MAPE {ours.tpot.mape * 100:.1f}%, TTFT MAPE {ours.ttft.mape * 100:.1f}%; "
            f"aiconfigurator TPOT MAPE {theirs.tpot.mape * 100:.1f}%, "
            f"TTFT MAPE {theirs.ttft.mape * 100:.1f}%; {THROUGHPUT} MAPE: llmcap "
            f"{ours.throughput.mape * 100:.1f}%, aiconfigurator {theirs.throughput.mape * 100:.1f}%"
        )
    elif with_aic and ok:  # say why rather than print a comparison of nothing
        reason, count = Counter(r.aic_error for r in ok).most_common(1)[0]
        click.echo(f"aiconfigurator answers none of the {len(ok)} points ({count}: {reason})")
    for title, key in GROUPS:
        if len({key(r) for r in ok}) > 1 or title not in _SHOWN_WHEN_MIXED:
            console.print(_group_table(ok, title, key, with_aic))


def print_held_out(
    folds: Sequence[tuple[Any, Sequence[PointResult], Sequence[PointResult]]],
    console: Console | None = None,
) -> None:
    """One row per fold: its points' MAPE with every table (as above) and held out."""
    console = console or Console()
    title = "held out (constants refitted without the row's data)"
    table = Table(title=title, title_justify="left")
    columns = ("held out", "n", "TPOT MAPE", "held-out TPOT", "TTFT MAPE", "held-out TTFT",
               "req/s MAPE", "held-out req/s")  # fmt: skip
    for col in columns:
        table.add_column(col, justify="left" if col == "held out" else "right")
    for fold, seen, held in folds:
        ok = [(a, b) for a, b in zip(seen, held, strict=True) if a.ok and b.ok]
        ours = llmcap_stats([a for a, _ in ok])
        theirs = llmcap_stats([b for _, b in ok])
        table.add_row(
            f"{fold.kind} {fold.name.rsplit('/', 1)[-1]}", str(len(ok)),
            _pct(ours.tpot.mape), _pct(theirs.tpot.mape),
            _pct(ours.ttft.mape), _pct(theirs.ttft.mape),
            _pct(ours.throughput.mape), _pct(theirs.throughput.mape),
        )  # fmt: skip
    console.print(table)
    for fold, _, _ in folds:
        click.echo(f"  excluded: {fold.excluded}")


def _group_table(
    results: Sequence[PointResult],
    title: str,
    key: Callable[[PointResult], str],
    with_aic: bool,
) -> Table:
    table = Table(title=f"by {title}", title_justify="left")
    table.add_column(title, style="bold")
    table.add_column("n", justify="right")
    for metric in ("TPOT", "TTFT"):
        table.add_column(f"{metric} MAPE", justify="right")
        table.add_column(f"{metric} median", justify="right")
        table.add_column(f"{metric} ±10%", justify="right")
    table.add_column("req/s MAPE", justify="right")
    if with_aic:
        table.add_column("aic TPOT MAPE", justify="right")
        table.add_column("aic TTFT MAPE", justify="right")
    for name, stats in grouped(results, key, lambda rs: _Both(rs, with_aic)):  # type: ignore[arg-type]
        row = [name, str(stats.ours.tpot.n)]
        for metric in (stats.ours.tpot, stats.ours.ttft):
            row += [_pct(metric.mape), _pct(metric.median_signed, True), _pct(metric.within)]
        row.append(_pct(stats.ours.throughput.mape))
        if with_aic and stats.theirs is not None:
            row += [_pct(stats.theirs.tpot.mape), _pct(stats.theirs.ttft.mape)]
        table.add_row(*row)
    return table


class _Both:
    """llmcap's and (optionally) aiconfigurator's statistics of one group."""

    def __init__(self, results: list[PointResult], with_aic: bool) -> None:
        self.ours = llmcap_stats(results)
        answered = [r for r in results if not r.aic_error]
        self.theirs = aic_stats(answered) if with_aic else None


CSV_COLUMNS = (
    "id", "source", "engine", "engine_version", "model_path", "model", "system", "sku", "tp", "pp",
    "precision", "kv_precision", "isl", "osl", "concurrency",
    "measured_ttft_ms", "predicted_ttft_ms", "ttft_error",
    "measured_tpot_ms", "predicted_tpot_ms", "tpot_error",
    "aic_ttft_ms", "aic_ttft_error", "aic_tpot_ms", "aic_tpot_error", "error", "aic_error",
    "weights", "client_warmup",
    "measured_req_s", "predicted_req_s", "req_s_error", "aic_req_s", "aic_req_s_error",
    "predicted_ttft_wait_ms", "predicted_prefill_busy",
)  # fmt: skip


def _ratio(predicted: float, measured: float) -> str:
    if math.isnan(predicted) or measured <= 0:
        return ""
    return f"{predicted / measured - 1:.4f}"


def _num(value: float) -> str:
    return "" if math.isnan(value) else f"{value:.4f}"


def write_points_csv(results: Sequence[PointResult], path: Path) -> Path:
    """Every point: its inputs, measured and predicted values, signed errors."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for r in results:
            p = r.point
            measured_rps = p.measured_requests_per_second
            predicted_rps = p.requests_per_second(r.predicted_ttft_ms, r.predicted_tpot_ms)
            aic_rps = p.requests_per_second(r.aic_ttft_ms, r.aic_tpot_ms)
            writer.writerow(
                [
                    p.id, p.source, p.engine, p.engine_version, p.model_path, p.model, p.system,
                    p.sku, p.tp, p.pp, p.precision.value, p.kv_precision.value, p.isl, p.osl,
                    p.concurrency,
                    _num(p.measured_ttft_ms), _num(r.predicted_ttft_ms),
                    _ratio(r.predicted_ttft_ms, p.measured_ttft_ms),
                    _num(p.measured_tpot_ms), _num(r.predicted_tpot_ms),
                    _ratio(r.predicted_tpot_ms, p.measured_tpot_ms),
                    _num(r.aic_ttft_ms), _ratio(r.aic_ttft_ms, p.measured_ttft_ms),
                    _num(r.aic_tpot_ms), _ratio(r.aic_tpot_ms, p.measured_tpot_ms),
                    r.error, r.aic_error, p.weights, p.client_warmup,
                    _num(measured_rps), _num(predicted_rps), _ratio(predicted_rps, measured_rps),
                    _num(aic_rps), _ratio(aic_rps, measured_rps),
                    _num(r.predicted_ttft_wait_ms), _num(r.predicted_prefill_busy),
                ]
            )  # fmt: skip
    return path


def plot_predicted_vs_measured(results: Sequence[PointResult], path: Path) -> Path:
    """Log-log TPOT and TTFT panels, one colour per engine, the y = x line and +-10% band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in results if r.ok]
    engines = sorted({r.point.engine for r in ok})
    fig, axes = plt.subplots(1, 2, figsize=(11, 5), constrained_layout=True)
    panels = (
        ("TPOT (ms)", lambda r: (r.point.measured_tpot_ms, r.predicted_tpot_ms)),
        ("TTFT (ms)", lambda r: (r.point.measured_ttft_ms, r.predicted_ttft_ms)),
    )
    for ax, (label, values) in zip(axes, panels, strict=True):
        lo, hi = math.inf, 0.0
        for engine in engines:
            pairs = [values(r) for r in ok if r.point.engine == engine]
            pairs = [(m, p) for m, p in pairs if m > 0 and p > 0 and math.isfinite(p)]
            if not pairs:
                continue
            xs, ys = zip(*pairs, strict=True)
            ax.scatter(xs, ys, s=12, alpha=0.7, label=engine)
            lo, hi = min(lo, *xs, *ys), max(hi, *xs, *ys)
        if hi > 0:
            line = [lo / 1.2, hi * 1.2]
            ax.plot(line, line, color="black", linewidth=1)
            ax.fill_between(line, [v * 0.9 for v in line], [v * 1.1 for v in line],
                            color="grey", alpha=0.2, label="±10%")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"measured {label}")
        ax.set_ylabel(f"predicted {label}")
        ax.set_title(label.split(" ")[0])
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
