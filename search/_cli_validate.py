"""`llmcap validate`: run the simulator against measured results and print its errors."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from search._cli_common import user_errors

DATASETS = ("aic-silicon",)
OTHER_DATASETS = ("vidur-ops", "FILE.json (vllm bench serve)")
FILTER_KEYS = ("engine", "gpu", "model", "tp", "concurrency", "source", "weights")

VALIDATE_EPILOG = """
\b
Examples:
  llmcap validate --dataset aic-silicon
  llmcap validate --dataset aic-silicon --out validation/          # points.csv + plot
  llmcap validate --dataset aic-silicon --filter engine=vllm --filter gpu=h200
  llmcap validate --dataset aic-silicon --limit 40 --no-aic         # a quick look
  llmcap validate --dataset aic-silicon --models moe                # mixtures of experts
  llmcap validate --dataset aic-silicon --models all --modes disagg # prefill/decode pools
  llmcap validate --dataset aic-silicon --no-aic --hold-out gpu,model
  llmcap validate --dataset vidur-ops --vidur-dir vidur/data
  llmcap validate --dataset results/ --gpu h100-sxm --tp 1          # vllm bench serve JSONs

\b
aic-silicon: the aggregated, dense-model points NVIDIA ships in aiconfigurator-core
(`pip install 'llmcap[aic]'`), each simulated as its benchmark client ran it: a closed
loop at the measured concurrency, about ten requests per concurrency slot, the lengths its
client sends (the public InferenceMAX runs draw prompt and output lengths uniformly from
[0.8 L, L]; NVIDIA's own runs fix them); mean TTFT, and mean TPOT = (E2E - TTFT) /
(output tokens - 1).
Errors are predicted / measured - 1.

\b
--hold-out gpu,model: the roofline's vLLM/SGLang/TensorRT-LLM constants are fitted to
aiconfigurator's operator tables, not to these points; each fold refits them without
one GPU's tables (or the rows at one model's shapes) and scores that GPU's (model's)
points again: the "held out" table beside the normal one.

\b
vidur-ops: the roofline's operator times against Vidur's public profiling tables
(--vidur-dir): its constants refitted without ~20% of the rows (chosen by a hash of each
row's key) and scored on them, then leave-one-GPU-out and leave-one-model-out.

\b
FILE.json (repeatable, or a directory): results of `vllm bench serve --save-result`,
each simulated as its client ran it (closed loop at max_concurrency, else the request
rate and burstiness; per-request lengths with --save-detailed, else the means) on the
deployment the JSON does not record: --gpu, --tp, --pp, --engine, --model, --precision.
"""


@click.command("validate", epilog=VALIDATE_EPILOG)
@click.option(
    "--dataset",
    "datasets",
    multiple=True,
    default=("aic-silicon",),
    show_default=True,
    help=f"Measured results to validate against: {', '.join(DATASETS + OTHER_DATASETS)}; "
    "repeat for several JSON files, or name a directory of them.",
)
@click.option(
    "--vidur-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="vidur-ops: a copy of Vidur's data/ folder (profiling/compute/..., profiling_2024/...).",
)
@click.option("--gpu", default=None, metavar="SKU", help="FILE.json: the GPU that served it.")
@click.option("--tp", type=click.IntRange(min=1), default=1, show_default=True,
              help="FILE.json: tensor-parallel degree.")  # fmt: skip
@click.option("--pp", type=click.IntRange(min=1), default=1, show_default=True,
              help="FILE.json: pipeline-parallel degree.")  # fmt: skip
@click.option("--engine", default="vllm", show_default=True, metavar="NAME[@VERSION]",
              help="FILE.json: the engine profile that served it.")  # fmt: skip
@click.option("--model", default=None,
              help="FILE.json: the model [the JSON's model_id when llmcap knows it].")  # fmt: skip
@click.option("--precision", type=click.Choice(["bf16", "fp16", "fp8"]), default=None,
              help="FILE.json: weight precision [the checkpoint's own: fp8 where its "
              "config.json quantises the weights, else bf16].")  # fmt: skip
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write points.csv (every point) and predicted_vs_measured.png here.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="Validate only N points, spread evenly over the selection.",
)
@click.option(
    "--filter",
    "filters",
    multiple=True,
    metavar="KEY=VALUE",
    help=f"Keep points whose KEY matches ({', '.join(FILTER_KEYS)}); model and weights "
    "match a substring (weights=fp4: the 4-bit checkpoints), gpu the catalog id or the "
    "system name; KEY!=VALUE keeps those that do not match; repeatable.",
)
@click.option(
    "--models",
    "model_kinds",
    type=click.Choice(["dense", "moe", "all"]),
    default="dense",
    show_default=True,
    help="aic-silicon: the points of dense models, of mixtures of experts (moe) or all.",
)
@click.option(
    "--modes",
    type=click.Choice(["agg", "disagg", "all"]),
    default="agg",
    show_default=True,
    help="aic-silicon: the aggregated points, the disaggregated ones (a prefill pool and a "
    "decode pool, each priced at its own GPUs and parallelism) or all.",
)
@click.option(
    "--aic/--no-aic",
    "with_aic",
    default=True,
    show_default=True,
    help="Also run aiconfigurator's own estimate of each point and show both tools "
    "(aggregated points through aiconfigurator-core, disaggregated ones through the "
    "aiconfigurator package's disaggregated estimate; both come with llmcap[aic]).",
)
@click.option(
    "--estimator",
    type=click.Choice(["roofline", "profiled", "auto"]),
    default="roofline",
    show_default=True,
    help="Cost model: profiled reads the measured operator tables of each point's engine "
    "and version (points without tables are reported as not simulated); auto falls back "
    "to the roofline there.",
)
@click.option(
    "--op-tables",
    "op_tables",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="aic-silicon: time the operators from these tables (`llmcap profile run`) instead "
    "of aiconfigurator's; needs --estimator profiled or auto, and keeps the points of the "
    "GPU they were measured on.",
)
@click.option(
    "--requests-per-slot",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Requests simulated per concurrency slot (the client sends about ten).",
)
@click.option(
    "--engines",
    default="auto",
    show_default=True,
    metavar="auto|NAME[@VERSION]",
    help="Engine profile of each point: auto = the point's own engine and version; vidur = "
    "every engine as Vidur's 2024 vLLM (llmcap before engine profiles); or one profile for all.",
)
@click.option(
    "--hold-out",
    "hold_out",
    default=None,
    metavar="gpu,model",
    help="Also score each GPU's (model's) points with the roofline's engine constants "
    "refitted without that GPU's operator tables (that model's shapes): leave-one-out. "
    "With --estimator profiled only the roofline's fallbacks use those constants.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Processes simulating points [the CPU count, at most 8].",
)
@user_errors
def validate(
    datasets: tuple[str, ...],
    vidur_dir: Path | None,
    gpu: str | None,
    tp: int,
    pp: int,
    engine: str,
    model: str | None,
    precision: str | None,
    out_dir: Path | None,
    limit: int | None,
    filters: tuple[str, ...],
    model_kinds: str,
    modes: str,
    with_aic: bool,
    estimator: str,
    op_tables: Path | None,
    requests_per_slot: int,
    engines: str,
    workers: int | None,
    hold_out: str | None,
) -> None:
    """Simulate measured deployments and print the error table.

    Prints `TPOT MAPE x%` and `TTFT MAPE y%` over all points, then the errors by engine,
    GPU, model, concurrency band and, where they differ, prompt/output lengths, campaign,
    weights and client warm-up: the mean absolute percentage error (MAPE), the
    median signed error (predicted / measured - 1; positive = predicted too slow) and
    the share of points within ±10%.  A third line and column score the request
    throughput each side implies at the measured concurrency (the capacity a search
    ranks by): C / (TTFT + (output tokens - 1) x TPOT), by Little's law; its signed
    error is positive where the prediction serves more requests than were measured.
    """
    from search._errors import SpecError
    from search._validate import load_aic_silicon, simulate_points
    from search._validate._report import (
        plot_predicted_vs_measured,
        print_report,
        write_points_csv,
    )

    if datasets != ("aic-silicon",):
        if op_tables is not None:
            raise SpecError("--op-tables: only --dataset aic-silicon reads operator tables")
        serving = {"gpu": gpu, "tp": tp, "pp": pp, "engine": engine, "model": model}
        from search._cli_validate_datasets import run_other_datasets

        run_other_datasets(datasets, vidur_dir, {**serving, "precision": precision}, _console())
        return
    dataset = datasets[0]
    if dataset not in DATASETS:
        raise SpecError(f"unknown dataset {dataset!r}; available: {', '.join(DATASETS)}")
    kinds: tuple[str, ...] = ()
    if hold_out is not None:
        from search._validate._holdout import parse_hold_out

        try:
            kinds = parse_hold_out(hold_out)
        except ValueError as exc:
            raise SpecError(str(exc)) from None
    if engines != "auto":
        from estimators import UnknownEngineError, load_engine

        try:
            load_engine(engines)
        except UnknownEngineError as exc:
            raise SpecError(f"--engines: {exc}") from None
    tables_sku = _op_tables_sku(op_tables, estimator) if op_tables is not None else None
    selection = load_aic_silicon(model_kinds, modes)
    points = _apply_filters(selection.points, filters)
    tables_note = ""
    if tables_sku:
        points = [p for p in points if p.sku == tables_sku]
        tables_note = f" (the {tables_sku} points: the op tables' GPU)"
    if limit is not None and limit < len(points):
        step = len(points) / limit
        points = [points[int(i * step)] for i in range(limit)]
    skipped = ", ".join(f"{count} {reason}" for reason, count in selection.skipped.most_common())
    click.echo(
        f"{dataset}: {len(selection.points)} of {selection.total_rows} rows can be simulated "
        f"(skipped: {skipped})"
    )
    if not points:
        raise SpecError("no point matches the filters" + tables_note)
    if len(points) != len(selection.points):
        click.echo(f"validating {len(points)} of them{tables_note}")
    if with_aic:
        from search._validate._aic_estimate import aic_available

        with_aic = aic_available()
    started = time.perf_counter()
    with _progress(len(points)) as advance:
        results = simulate_points(
            points,
            requests_per_slot=requests_per_slot,
            with_aic=with_aic,
            workers=workers,
            on_done=advance,
            estimator=estimator,
            engines=engines,
            op_tables=str(op_tables) if op_tables is not None else None,
        )
    failed = [r for r in results if not r.ok]
    elapsed = time.perf_counter() - started
    click.echo(
        f"simulated {len(results) - len(failed)} points in {elapsed:.0f} s (estimator: {estimator})"
    )
    if failed:
        reasons: dict[str, int] = {}
        for r in failed:
            kind = r.error.split(":", 1)[0]
            reasons[kind] = reasons.get(kind, 0) + 1
        listed = ", ".join(f"{n} {kind}" for kind, n in sorted(reasons.items()))
        click.echo(f"{len(failed)} points could not be simulated ({listed}); see points.csv")
    print_report(results, with_aic=with_aic, console=_console())
    if kinds:
        _held_out(results, kinds, requests_per_slot, workers, estimator, engines)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        csv_path = write_points_csv(results, out_dir / "points.csv")
        png_path = plot_predicted_vs_measured(results, out_dir / "predicted_vs_measured.png")
        click.echo(f"wrote {csv_path} and {png_path}")


def _held_out(
    results: list,
    kinds: tuple[str, ...],
    requests_per_slot: int,
    workers: int | None,
    estimator: str,
    engines: str,
) -> None:
    """Simulate each fold's points with the constants refitted without its data and print
    the held-out table beside the errors of the same points above."""
    from estimators import aic_available
    from search._validate import simulate_points
    from search._validate._holdout import gpu_fold, model_fold
    from search._validate._report import print_held_out

    if not aic_available() or engines == "vidur":
        click.echo(
            "held out: nothing to hold out (the engine layers need the aic extra's tables "
            "and apply only to the vllm, sglang and trtllm profiles)"
        )
        return
    rows = []
    started = time.perf_counter()
    for kind in kinds:
        names = sorted({r.point.sku if kind == "gpu" else r.point.model for r in results})
        for name in names:
            fold = gpu_fold(name) if kind == "gpu" else model_fold(name)
            mine = [r for r in results if fold.selects(r.point)]
            held = simulate_points(
                [r.point for r in mine],
                requests_per_slot=requests_per_slot,
                workers=workers,
                estimator=estimator,
                engines=engines,
                fold=fold,
            )
            rows.append((fold, mine, held))
    click.echo(f"held-out folds: {len(rows)} in {time.perf_counter() - started:.0f} s")
    print_held_out(rows, console=_console())


def _op_tables_sku(op_tables: Path, estimator: str) -> str | None:
    """The catalog SKU the tables were measured on (None: they name none and time every
    point); SpecError for tables the estimator cannot read."""
    from estimators import load_op_tables
    from search._errors import SpecError
    from search._op_tables_input import check_op_tables

    try:
        check_op_tables(estimator, op_tables, [])
        return load_op_tables(op_tables).meta.sku
    except ValueError as exc:
        raise SpecError(f"--op-tables: {exc}") from None


def _apply_filters(points: list, filters: tuple[str, ...]) -> list:
    from search._errors import SpecError

    for text in filters:
        key, sep, value = text.partition("=")
        key, value = key.strip().lower(), value.strip()
        keep = not key.endswith("!")  # KEY!=VALUE: the points that do not match
        key = key.removesuffix("!").strip()
        if not sep or key not in FILTER_KEYS or not value:
            raise SpecError(
                f"--filter {text!r}: expected KEY=VALUE (or KEY!=VALUE) with KEY one of "
                f"{', '.join(FILTER_KEYS)}"
            )
        points = [p for p in points if _matches(p, key, value) == keep]
    return points


def _matches(point, key: str, value: str) -> bool:
    low = value.lower()
    if key == "engine":
        return point.engine == low
    if key == "gpu":
        return low in (point.sku, point.system)
    if key == "model":
        return low in point.model.lower() or low in point.model_path.lower()
    if key == "source":
        return point.source == low
    if key == "weights":  # the measured checkpoint's ("fp8", "bf16 + mxfp4 experts", ...)
        return low in point.weights
    return str(getattr(point, key)) == value


def _console() -> Console:
    console = Console()
    if not console.is_terminal:
        console = Console(width=140)
    return console


@contextmanager
def _progress(total: int) -> Iterator:
    """A transient progress bar of validated points, on a terminal only."""
    console = Console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    columns = (
        TextColumn("validating"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("points"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("validate", total=total)
        yield lambda _result: progress.advance(task)
