"""`llmcap plan ...`: capacity plans run on a schedule, their history and their changes."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from search._cli_common import db_option, open_db, print_table, user_errors

console = Console(soft_wrap=True)  # whole lines in logs (cron, journald)
EXIT_CHANGED = 3

catalog_option = click.option(
    "--catalog", "catalog_files", multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A SKU catalog file (e.g. today's prices) after the plan's own; repeatable.",
)  # fmt: skip


@click.group("plan")
def plan_group() -> None:
    """Capacity plans: fleets and costs for forecast traffic, and what changed since last run.

    \b
    A plan (YAML) lists services: a search each (model, workload, SKUs, SLOs, space, or
    `spec: FILE`) and its demand (peak QPS now, dated points or monthly growth, an optional
    daily profile), optionally the fleet running today; see examples/capacity_plan.yaml.
      llmcap plan validate examples/capacity_plan.yaml
      llmcap plan run examples/capacity_plan.yaml --out reports
      llmcap plan history examples/capacity_plan.yaml
    \b
    Exit status of `plan run`: 0 nothing to act on, 3 something changed or needs acting on
    (deployment, QPS per dollar, fleet cost, an SLO, a price, a fleet short of the forecast),
    2 bad input (nothing written).
    """


@plan_group.command("validate")
@click.argument("plan_file", type=click.Path(dir_okay=False, path_type=Path))
@catalog_option
@user_errors
def validate(plan_file: Path, catalog_files: tuple[Path, ...]) -> None:
    """Check a plan as `plan run` does, without running it."""
    import datetime as dt

    from search._plan import check_plan, load_plan

    plan = load_plan(plan_file, catalog_files)
    check_plan(plan)
    today = dt.datetime.now(dt.UTC).date()
    console.print(f"[bold]{plan_file}[/bold]: plan {plan.name!r}, headroom {plan.headroom:.0%}")
    for service in plan.services:
        forecast = service.demand.forecast(today)
        console.print(
            f"  {service.name}: {service.search.model} on {', '.join(service.search.skus)}; "
            f"{len(forecast)} forecast date(s), {forecast[0][1]:g} -> {forecast[-1][1]:.3g} QPS "
            f"by {forecast[-1][0]}"
            + ("; daily profile" if service.demand.daily_profile else "")
            + (f"; current fleet {service.current_fleet.replicas} x "
               f"{service.current_fleet.deployment}" if service.current_fleet else "")
        )  # fmt: skip
    console.print("valid")


@plan_group.command("run")
@click.argument("plan_file", type=click.Path(dir_okay=False, path_type=Path))
@db_option
@click.option(
    "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("reports"),
    show_default=True, help="Reports go to OUT/<plan>/<date>/.",
)  # fmt: skip
@catalog_option
@click.option("--webhook", default=None, metavar="URL", help="POST the run's summary as JSON.")
@click.option(
    "--executor", type=click.Choice(["local", "ray", "inline"]), default="local",
    show_default=True, help="Where the searches simulate: a process pool, Ray, this process.",
)  # fmt: skip
@click.option(
    "--address", default=None,
    help="Ray cluster to join with --executor ray (HOST:6379, ray://HOST:10001 or auto).",
)  # fmt: skip
@click.option("--workers", type=int, default=None, help="Process-pool size [cores].")
@user_errors
def run(plan_file: Path, db: str | None, out_dir: Path, catalog_files: tuple[Path, ...],
        webhook: str | None, executor: str, address: str | None,
        workers: int | None) -> None:  # fmt: skip
    """Run a plan: search (or reuse), size the fleets, report, compare with the last run.

    Exit status 0 when nothing crossed a threshold, 3 when something did, 2 on bad input.
    """
    from search._db import PlanRun
    from search._plan import check_plan, compare, load_plan, run_plan, write_report
    from search._plan._webhook import check_webhook_url, post_json

    if webhook is not None:
        check_webhook_url(webhook)
    plan = load_plan(plan_file, catalog_files)
    check_plan(plan)
    database = open_db(db)
    previous = next(iter(database.plan_runs(plan.name, limit=1)), None)
    summary, counts, frames = run_plan(
        plan, database, executor, address, workers  # type: ignore[arg-type]
    )
    changes = compare(previous.summary if previous else None, summary, plan.alerts)
    status = EXIT_CHANGED if changes else 0
    searches = {"evaluated": counts.evaluated, "refined": counts.refined,
                "simulations": counts.simulations, "reused": counts.reused,
                "per_service": counts.per_service}  # fmt: skip
    target = write_report(out_dir, summary, changes, searches, frames)
    inputs = {
        "alerts": plan.alerts.model_dump(),
        "services": {s["service"]: {"spec_fingerprint": s["spec_fingerprint"],
                                    "job_id": s["job_id"], "prices": s["prices"]}
                     for s in summary["services"]},
    }  # fmt: skip
    record = database.record_plan_run(PlanRun(
        plan_name=plan.name, plan_fingerprint=plan.fingerprint, exit_status=status,
        inputs=inputs, summary=summary, changes=changes, report_dir=str(target),
    ))  # fmt: skip
    _print_run(record.id, summary, changes, searches, target, previous)
    if webhook is not None:
        failure = post_json(webhook, {
            "plan": plan.name, "run_id": record.id, "date": summary["date"],
            "exit_status": status, "changes": changes, "totals": summary["totals"],
            "recommended": {s["service"]: s["recommended"] for s in summary["services"]},
            "report_dir": str(target),
        })  # fmt: skip
        if failure:
            click.echo(f"warning: --webhook {webhook}: {failure}", err=True)
    sys.exit(status)


def _print_run(run_id: int, summary: dict, changes: list[dict], searches: dict, target: Path,
               previous: object) -> None:  # fmt: skip
    totals = summary["totals"]
    console.print(
        f"plan {summary['plan']!r} run {run_id}: {searches['evaluated']} configurations "
        f"simulated, {searches['reused']} reused; fleet now {totals['gpus_now']} GPUs "
        f"${totals['cost_per_month_now']:,.0f}/month, at the horizon {totals['gpus_at_horizon']} "
        f"GPUs ${totals['cost_per_month_at_horizon']:,.0f}/month"
    )
    for service in summary["services"]:
        best = service["recommended"]
        console.print(f"  {service['service']}: " + (
            f"{best['deployment']}, {best['qps_per_dollar']:.3f} QPS per $/h "
            f"({best['price']['sku']} ${best['price']['price_per_gpu_hour']:.4g}/GPU-h, "
            f"{best['price']['price_date']})" if best else "no recommendation"
        ), highlight=False)  # fmt: skip
    against = f"since run {previous.id}" if previous is not None else "(first run)"
    if changes:
        console.print(f"[bold red]{len(changes)} change(s) {against}[/bold red]:")
        for change in changes:
            console.print(f"  {change['service']}: {change['message']}", highlight=False)
    else:
        console.print(f"nothing to act on {against}")
    console.print(f"report: {target}/report.html")


@plan_group.command("history")
@click.argument("plan")
@db_option
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@user_errors
def history(plan: str, db: str | None, limit: int) -> None:
    """Past runs of a plan (a plan file or its name) and their headline figures."""
    name = _plan_name(plan)
    runs = open_db(db, create=False).plan_runs(name, limit=limit)
    if not runs:
        from search._errors import SpecError

        raise SpecError(f"no runs of plan {name!r} in this database; `llmcap plan run` makes one")
    table = Table(title=f"Runs of plan {name}", title_justify="left")
    for column in ("run", "at", "exit", "GPUs now", "$/month now", "$/month horizon",
                   "recommended", "changes"):  # fmt: skip
        table.add_column(column)
    for r in runs:
        totals = r.summary["totals"]
        picks = "; ".join(f"{s['service']}: {s['recommended']['deployment']}"
                          if s["recommended"] else f"{s['service']}: none"
                          for s in r.summary["services"])  # fmt: skip
        table.add_row(str(r.id), r.created_at.strftime("%Y-%m-%d %H:%M"), str(r.exit_status),
                      str(totals["gpus_now"]), f"${totals['cost_per_month_now']:,.0f}",
                      f"${totals['cost_per_month_at_horizon']:,.0f}", picks,
                      str(len(r.changes)))  # fmt: skip
    print_table(table)


@plan_group.command("diff")
@click.argument("run_a", type=int)
@click.argument("run_b", type=int)
@db_option
@user_errors
def diff(run_a: int, run_b: int, db: str | None) -> None:
    """What changed from plan run A to plan run B (ids from `plan history`).

    Exit status 0 when nothing crossed a threshold, 3 when something did.
    """
    from search._plan import compare
    from search._plan._spec import AlertSpec

    database = open_db(db, create=False)
    a, b = database.get_plan_run(run_a), database.get_plan_run(run_b)
    alerts = AlertSpec.model_validate(b.inputs.get("alerts", {}))
    changes = [c for c in compare(a.summary, b.summary, alerts)
               if c["kind"] not in ("current_fleet", "no_recommendation")]  # fmt: skip
    console.print(f"plan run {a.id} ({a.plan_name}, {a.summary['date']}) -> run {b.id} "
                  f"({b.plan_name}, {b.summary['date']})")  # fmt: skip
    for change in changes:
        console.print(f"  {change['service']}: {change['message']}", highlight=False)
    if not changes:
        console.print("  nothing crossed a threshold")
    sys.exit(EXIT_CHANGED if changes else 0)


def _plan_name(plan: str) -> str:
    """A plan file's name field, or the argument itself when it is not a file."""
    path = Path(plan)
    if not path.is_file():
        return plan
    from search._plan._spec import PlanFile
    from sku_catalog import read_yaml_file

    data = read_yaml_file(path, "plan file")
    name = data.get("name") if isinstance(data, dict) else None
    return str(name) if name else PlanFile.model_validate(data).name
