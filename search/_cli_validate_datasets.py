"""`llmcap validate --dataset vidur-ops` and `--dataset FILE.json` (vllm bench serve)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from search._errors import SpecError


def run_other_datasets(
    datasets: tuple[str, ...], vidur_dir: Path | None, serving: dict[str, Any], console: Console
) -> None:
    """`--dataset vidur-ops`, or vllm bench serve JSON files and directories."""

    if "vidur-ops" in datasets:
        if len(datasets) > 1:
            raise SpecError("--dataset vidur-ops cannot be combined with another dataset")
        run_vidur_ops(vidur_dir, console)
        return
    if any(name == "aic-silicon" for name in datasets):
        raise SpecError("--dataset aic-silicon cannot be combined with another dataset")
    paths = [Path(name) for name in datasets]
    for path in paths:
        if path.suffix != ".json" and not path.exists():
            raise SpecError(
                f"unknown dataset {str(path)!r}; available: aic-silicon, vidur-ops, or "
                "FILE.json (a vllm bench serve result, or a directory of them)"
            )
    run_bench_files(paths, console=console, **serving)


def run_vidur_ops(vidur_dir: Path | None, console: Console) -> None:
    """Refit the roofline without the held-out rows (and each GPU, each model) and print
    the operator errors; progress goes to stderr."""
    from search._validate._ops_report import print_vidur_ops
    from search._validate._vidur_ops import (
        HELD_OUT_SHARE,
        load_vidur_ops,
        row_count,
        validate_vidur_ops,
    )

    if vidur_dir is None:
        raise SpecError(
            "--dataset vidur-ops needs --vidur-dir DIR: a copy of Vidur's data/ folder "
            "(github.com/microsoft/vidur, with profiling/compute/<gpu>/<org>/<model>/mlp.csv)"
        )
    started = time.perf_counter()
    data = load_vidur_ops(vidur_dir)

    def progress(message: str) -> None:
        click.echo(f"[{time.perf_counter() - started:4.0f} s] {message}", err=True)

    result = validate_vidur_ops(data, progress=progress)
    held = result.held_out
    click.echo(
        f"vidur-ops: {row_count(data)} measured rows in {vidur_dir}; the roofline's constants "
        f"refitted on {held.fit_rows} of them and scored on the other {held.held_rows} "
        f"({len(held.scored)} operator times): the rows whose BLAKE2b hash of (table, GPU, "
        f"model, TP, tokens / batch shape / message size) falls in the lowest "
        f"{HELD_OUT_SHARE:.0%}; "
        f"{len(result.leave_gpu_out) + len(result.leave_model_out) + 1} fits in "
        f"{time.perf_counter() - started:.0f} s"
    )
    print_vidur_ops(result, console)


def run_bench_files(
    paths: list[Path],
    *,
    console: Console,
    gpu: str | None,
    tp: int,
    pp: int,
    engine: str,
    model: str | None,
    precision: str | None,
) -> None:
    """Simulate each `vllm bench serve` result as its client ran it; one table per file."""
    from estimators import Precision, UnknownEngineError, load_engine
    from search._validate import catalog_model_name
    from search._validate._bench_json import (
        Serving,
        bench_files,
        read_bench_json,
        simulate_bench,
    )
    from sku_catalog import load_catalog

    if gpu is None:
        raise SpecError(
            "--dataset FILE.json needs --gpu SKU: the JSON does not say which GPU served it "
            "(see `llmcap catalog skus`)"
        )
    known = load_catalog().ids()
    if gpu not in known:
        raise SpecError(f"--gpu {gpu!r}: not in the catalog; known: {', '.join(known)}")
    try:
        load_engine(engine)
    except UnknownEngineError as exc:
        raise SpecError(f"--engine: {exc}") from None
    runs = [read_bench_json(path) for path in bench_files(paths)]
    for run in runs:
        name = model or run.model_id
        resolved = catalog_model_name(name) if name else None
        if resolved is None:
            where = "--model" if model else f"{run.path}: field model_id"
            raise SpecError(
                f"{where}: {name!r} is not a model llmcap knows; pass --model with a built-in "
                "model (`llmcap catalog models`) or a config.json of the same architecture"
            )
        weights = Precision(precision) if precision else None  # None: the checkpoint's own
        serving = Serving(resolved, gpu, tp, pp, engine, weights)
        started = time.perf_counter()
        rows = simulate_bench(serving, run)
        traffic = (
            f"closed loop at {run.max_concurrency}"
            if math.isinf(run.request_rate) and run.max_concurrency
            else "all at t=0"
            if math.isinf(run.request_rate)
            else f"{run.request_rate:g} req/s, burstiness {run.burstiness:g}"
            + (f", at most {run.max_concurrency} in flight" if run.max_concurrency else "")
        )
        table = Table(
            title=f"{run.path.name}: {resolved} on {gpu} TP{tp} PP{pp}, {engine}; "
            f"{run.num_requests} requests, {traffic} "
            f"(simulated in {time.perf_counter() - started:.1f} s)",
            title_justify="left",
        )
        for column in ("metric", "measured", "llmcap", "error"):
            table.add_column(column, justify="left" if column == "metric" else "right")
        for row in rows:
            error = "-" if math.isnan(row.error) else f"{row.error * 100:+.1f}%"
            table.add_row(row.name, f"{row.measured:.2f}", f"{row.predicted:.2f}", error)
        console.print(table)
