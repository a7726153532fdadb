"""`llmcap results ...` and `llmcap pareto ...`: read the results database; never simulate."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console

from search._cli_common import (
    db_option,
    emit_records,
    json_text,
    open_db,
    print_table,
    records_options,
    user_errors,
)
from search._outputs import check_output_file, writing
from search._plot import PLOT_FORMATS

console = Console()  # made again when a command group runs (`_fresh_console`)


def _fresh_console() -> None:
    """A console for this invocation: rich reads the terminal's width (COLUMNS) when a console
    is made, and a module outlives one command when several run in one process."""
    global console
    console = Console()

EXPORT_FORMATS = (".csv", ".json", ".parquet")

job_argument = click.argument("job", type=int, required=False)


def _filters(sku: tuple[str, ...], scheduler: tuple[str, ...], slo: str | None) -> dict:
    filters: dict = {}
    if sku:
        filters["sku"] = list(sku)
    if scheduler:
        filters["scheduler"] = list(scheduler)
    if slo is not None:
        filters["slo_passed"] = slo == "pass"
    return filters


def filter_options(func):
    func = click.option(
        "--slo", type=click.Choice(["pass", "fail"]), default=None,
        help="Only configurations that meet (pass) or miss (fail) the SLO filters.",
    )(func)  # fmt: skip
    func = click.option("--scheduler", multiple=True, help="Only these schedulers; repeatable.")(
        func
    )
    return click.option("--sku", multiple=True, help="Only these SKUs; repeatable.")(func)


@click.group("results")
def results_group() -> None:
    """Query a job's results (JOB defaults to the latest job)."""
    _fresh_console()


@results_group.command("list")
@job_argument
@db_option
@filter_options
@click.option("--limit", type=int, default=30, show_default=True, help="Rows to show.")
@records_options
@click.option("--wide", is_flag=True, help="Every column (engine, GPUs, cost, capacity kind...).")
@user_errors
def results_list(job, db, sku, scheduler, slo, limit, fmt: str | None, wide: bool) -> None:
    """Configurations ranked by QPS per dollar (SLO-passing first).

    With --json or --csv, every field of each row (latencies in seconds, as in exports)."""
    from search._results_view import ranked_results, records_json, results_table

    database = open_db(db, create=False)
    frame = ranked_results(database, job, **_filters(sku, scheduler, slo))
    if fmt:
        emit_records(json.loads(records_json(frame.head(limit))), fmt)
        return
    job_id = database.get_job(job).id
    title = f"Job {job_id}: {len(frame)} configurations with results"
    print_table(results_table(frame.head(limit), title, wide=wide), whole=wide)


@results_group.command("show")
@job_argument
@db_option
@click.option("--wide", is_flag=True, help="Every column of the frontier tables.")
@click.option("--json", "json_output", is_flag=True, help="The job, counts and frontiers as JSON.")
@user_errors
def results_show(job, db, wide: bool, json_output: bool) -> None:
    """A job: its spec, status, counts and Pareto frontiers."""
    from search._db.store import job_state
    from search._results_view import job_spec, ranked_results, records_json, results_table

    database = open_db(db, create=False)
    record, spec = job_spec(database, job)
    counts = database.configuration_counts(record.id)
    if json_output:
        frame = ranked_results(database, record.id).set_index("configuration_id", drop=False)
        points = database.pareto_points(record.id)
        frontiers = {
            name: json.loads(records_json(frame.loc[
                [i for i in group.sort_values("rank")["configuration_id"] if i in frame.index]
            ]))
            for name, group in points.groupby("frontier", sort=True)
        }  # fmt: skip
        click.echo(json.dumps({
            "job_id": record.id, "name": record.name, "status": job_state(record),
            "model": spec.model, "skus": spec.skus, "strategy": spec.strategy.kind,
            "configurations": counts, "error": record.error, "frontiers": frontiers,
        }, indent=2, default=str))  # fmt: skip
        return
    console.print(
        f"[bold]job {record.id}[/bold] {record.name!r}: {job_state(record)}; model {spec.model}; "
        f"SKUs {', '.join(spec.skus)}; strategy {spec.strategy.kind}"
    )
    console.print(
        "configurations: " + ", ".join(f"{count} {status}" for status, count in counts.items())
    )
    if record.error:
        console.print(f"[red]error[/red]: {record.error}")
    frame = ranked_results(database, record.id).set_index("configuration_id", drop=False)
    points = database.pareto_points(record.id)
    if points.empty:
        console.print("Pareto frontiers: none (no configuration meets the SLOs on a measured "
                      "capacity; `llmcap results best` says why)")  # fmt: skip
    for frontier, group in points.groupby("frontier", sort=True):
        ids = [i for i in group.sort_values("rank")["configuration_id"] if i in frame.index]
        print_table(
            results_table(frame.loc[ids], f"Pareto frontier {frontier}", wide=wide), whole=wide
        )


@results_group.command("best")
@job_argument
@db_option
@click.option("--json", "json_output", is_flag=True, help="Print the recommendation as JSON.")
@click.pass_context
@user_errors
def results_best(ctx: click.Context, job, db, json_output: bool) -> None:
    """The recommended deployment: configuration, replicas for the budget, cost, latency.

    \b
    Exit status: 0 with a recommendation, 1 when no configuration qualifies (none meets the
    SLOs, or nothing was evaluated: the reason is printed), 2 on bad input, so a scheduled
    run can act on it.
    """
    from search._results_view import print_best, recommendation

    database = open_db(db, create=False)
    if json_output:
        answer = recommendation(database, job)
        click.echo(json.dumps(answer, indent=2))
        found = answer["recommended"] is not None
    else:
        found = print_best(database, job, console)
    if not found:
        ctx.exit(1)


@results_group.command("export")
@job_argument
@db_option
@filter_options
@click.option(
    "--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
    help="Output file: .csv, .json or .parquet.",
)  # fmt: skip
@user_errors
def results_export(job, db, sku, scheduler, slo, out: Path) -> None:
    """Write every configuration of the job with its results (all statuses) to a file.

    \b
    Rows in the order of `results list` (SLO-passing first, then QPS per dollar), then the
    configurations without a result.  Latency columns are in seconds (`ttft_p90_s`, ...);
    `params` and `slo_detail` are JSON in CSV and Parquet.
    """
    from search._results_view import export_frame

    check_output_file(out, "--out", EXPORT_FORMATS)
    database = open_db(db, create=False)
    frame = export_frame(database, job, **_filters(sku, scheduler, slo))
    suffix = out.suffix.lower()
    # flat formats: the nested columns as JSON text (their keys vary by row)
    flat = frame.assign(
        **{col: frame[col].map(json_text) for col in ("params", "slo_detail")}
    )
    with writing(out, "--out"):
        if suffix == ".csv":
            flat.to_csv(out, index=False)
        elif suffix == ".json":
            frame.to_json(out, orient="records", indent=2, date_format="iso")
        else:
            flat.to_parquet(out, index=False)
    click.echo(f"wrote {len(frame)} configurations to {out}")


@click.group("pareto")
def pareto_group() -> None:
    """Pareto frontiers of a job: QPS per dollar against latency."""
    _fresh_console()


@pareto_group.command("plot")
@job_argument
@db_option
@click.option(
    "--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
    help="Output file: .png, .svg, .pdf (matplotlib) or .html (plotly, optional extra).",
)  # fmt: skip
@user_errors
def pareto_plot(job, db, out: Path) -> None:
    """QPS per dollar against TTFT P90 and against TBT P99, SLO lines, frontier, best point."""
    from search._pareto import best_configuration
    from search._plot import plot_pareto
    from search._results_view import job_spec, ranked_results

    check_output_file(out, "--out", PLOT_FORMATS)
    database = open_db(db, create=False)
    record, spec = job_spec(database, job)
    frame = ranked_results(database, record.id)
    best = best_configuration(frame) if len(frame) else None
    slo_lines = {s.column: s.max_s for s in spec.slo.filters if s.column in ("ttft_p90", "tbt_p99")}
    with writing(out, "--out"):
        path = plot_pareto(
            frame,
            out,
            slo_lines=slo_lines,
            best_id=None if best is None else best["configuration_id"],
            title=f"{spec.model}: job {record.id} ({record.name})",
        )
    click.echo(f"wrote {path}")
