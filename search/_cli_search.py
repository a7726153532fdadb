"""`llmcap search ...` and `llmcap jobs ...`: run, validate, submit and follow search jobs."""

from __future__ import annotations

import shlex
from collections import Counter
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from search._cli_common import db_option, open_db, user_errors

console = Console()


@click.group("search")
def search_group() -> None:
    """Run search jobs: find the deployment with the most QPS per dollar within the SLOs.

    \b
    A spec (YAML) names the model, workload, GPU SKUs and budget, the space of TP/PP,
    schedulers, batch and chunk sizes, the SLOs and the strategy; see examples/quick.yaml.
      llmcap search validate examples/quick.yaml
      llmcap search run examples/quick.yaml            # local Ray, results in results.db
      llmcap search submit spec.yaml --address http://HEAD:8265 --db postgresql://...
    """


@search_group.command("validate")
@click.argument("spec_file", type=click.Path(dir_okay=False, path_type=Path))
@user_errors
def validate(spec_file: Path) -> None:
    """Check a spec and show how many configurations it holds and which cannot run."""
    from search._space import candidates
    from search._spec import load_spec

    spec = load_spec(spec_file)
    cands = candidates(spec)
    feasible = [c for c in cands if c.feasible]
    console.print(f"[bold]{spec_file}[/bold] is valid: {spec.name!r}, model {spec.model}")
    console.print(
        f"{len(cands)} configurations: {len(feasible)} feasible, "
        f"{len(cands) - len(feasible)} dropped before simulation"
    )
    reasons = Counter(c.infeasible_reason.split(":")[0] for c in cands if not c.feasible)
    for kind, count in sorted(reasons.items()):
        example = next(
            c for c in cands if c.infeasible_reason and c.infeasible_reason.startswith(kind)
        )
        console.print(
            f"  {count:4d} {kind}  e.g. {example.point.label()}: {example.infeasible_reason}"
        )
    console.print(f"spec fingerprint {spec.fingerprint()[:16]}")


@search_group.command("run")
@click.argument("spec_file", type=click.Path(dir_okay=False, path_type=Path))
@db_option
@click.option(
    "--executor",
    type=click.Choice(["ray", "local", "inline"]),
    default="ray",
    show_default=True,
    help="ray: Ray tasks (a local Ray unless --address); local: a process pool; "
    "inline: in this process (debugging).",
)
@click.option(
    "--address", default=None, help="Ray cluster to join (HOST:6379, ray://HOST:10001 or auto)."
)
@click.option(
    "--workers", type=int, default=None, help="Process-pool size for --executor local [cores]."
)
@click.option("--resume", "resume_job", type=int, default=None, help="Continue this job id.")
@user_errors
def run(
    spec_file: Path, db: str | None, executor: str, address: str | None, workers: int | None,
    resume_job: int | None,
) -> None:  # fmt: skip
    """Run a search job in the foreground and store its results.

    Configurations already evaluated for the same spec (in this database) are reused,
    so running a spec again, or after an interruption, continues where it stopped.
    """
    from search._driver import SearchDriver
    from search._results_view import print_best
    from search._spec import load_spec

    spec = load_spec(spec_file)
    database = open_db(db)
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("running {task.fields[running]}  failed {task.fields[failed]}"),
        TextColumn("best {task.fields[best]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("configurations", total=None, running=0, failed=0, best="-")

        def show(p) -> None:
            best = f"{p.best_qps_per_dollar:.3f} QPS/$ ({p.best_label})" if p.best_label else "-"
            progress.update(
                task, total=p.total, completed=p.done, running=p.running, failed=p.failed, best=best
            )

        driver = SearchDriver(spec, database, executor, address, workers, on_progress=show)
        report = driver.run(resume_job)
    console.print(
        f"job {report.job_id} {report.status}: {report.evaluated} evaluated, "
        f"{report.refined} refined ({report.simulations} simulations), {report.cached} reused, "
        f"{report.failed} failed, "
        f"{report.infeasible} infeasible, {report.over_budget} over budget, "
        f"{report.wall_time_s:.1f} s"
    )
    for error in report.errors[:5]:
        console.print(f"[red]failed[/red] {error}")
    _note_unloaded(database, report.job_id, spec.workload.num_requests)
    print_best(database, report.job_id, console)


def _note_unloaded(database, job_id: int, num_requests: int) -> None:
    """Say when some capacities rest on the analytic ceiling, not on a measurement.

    Those configurations met the SLO at every rate probed up to their ceiling even on the
    longest workload the search lengthened to (capacity_kind "ceiling"); `num_requests`
    is the spec's workload.num_requests, where each search started.
    """
    from search._pareto import CEILING, capacity_kinds

    frame = database.results(job_id, status="done")
    unloaded = frame[(capacity_kinds(frame) == CEILING) & frame["capacity_qps"].notna()]
    if len(unloaded):
        lengths = unloaded["num_requests"].dropna()
        longest = int(lengths.max()) if len(lengths) else num_requests
        console.print(
            f"[yellow]note[/yellow]: {len(unloaded)} configuration(s) met the SLO at every rate "
            f"probed, up to their analytic throughput ceiling, even on {longest} requests "
            f"(searches start on {num_requests}): their capacity rests on "
            "that ceiling, not a measurement (capacity_kind 'ceiling'), and they are "
            "recommended only where no measured configuration meets the SLOs; raise "
            "capacity.max_requests (or workload.num_requests) to measure them"
        )


@search_group.command("submit")
@click.argument("spec_file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--address", required=True, help="Ray dashboard address, e.g. http://HEAD:8265.")
@click.option(
    "--db", "db", default=None, metavar="URL",
    help="Database the driver on the cluster writes to; default: the head's LLMCAP_DB.",
)  # fmt: skip
@user_errors
def submit(spec_file: Path, address: str, db: str | None) -> None:
    """Submit a search job to a Ray cluster (Ray Jobs API) and print its id.

    The spec's folder is uploaded as the job's working directory and the driver runs
    on the head.  It writes to --db, or to the head's LLMCAP_DB (deploy/kuberay sets
    it from a secret, which keeps the password out of the job's entrypoint).  Follow
    the job with `llmcap search status|logs ID --address ...`.
    """
    from search._ray_jobs import submit_job

    entrypoint = f"llmcap search run {shlex.quote(spec_file.name)} --address auto"
    if db:
        entrypoint += f" --db {shlex.quote(db)}"
    job_id = submit_job(address, entrypoint, spec_file.resolve().parent)
    click.echo(job_id)
    if not db:
        click.echo(
            "note: no --db: the driver writes to the head's LLMCAP_DB; where the head has "
            "none, to results.db in the job's temporary working directory on the head",
            err=True,
        )


@search_group.command("status")
@click.argument("ray_job_id")
@click.option("--address", required=True, help="Ray dashboard address, e.g. http://HEAD:8265.")
@user_errors
def status(ray_job_id: str, address: str) -> None:
    """Status of a submitted search job."""
    from search._ray_jobs import job_status

    click.echo(job_status(address, ray_job_id))


@search_group.command("logs")
@click.argument("ray_job_id")
@click.option("--address", required=True, help="Ray dashboard address, e.g. http://HEAD:8265.")
@user_errors
def logs(ray_job_id: str, address: str) -> None:
    """Logs of a submitted search job."""
    from search._ray_jobs import job_logs

    click.echo(job_logs(address, ray_job_id))


@search_group.command("cancel")
@click.argument("ray_job_id")
@click.option("--address", required=True, help="Ray dashboard address, e.g. http://HEAD:8265.")
@user_errors
def cancel(ray_job_id: str, address: str) -> None:
    """Stop a submitted search job (finished configurations stay in the database)."""
    from search._ray_jobs import stop_job

    click.echo(stop_job(address, ray_job_id))


@click.group("jobs")
def jobs_group() -> None:
    """Search jobs recorded in the results database."""


@jobs_group.command("list")
@db_option
@click.option("--limit", type=int, default=20, show_default=True)
@user_errors
def jobs_list(db: str | None, limit: int) -> None:
    """Recent jobs, newest first."""
    database = open_db(db)
    table = Table(title=f"Jobs in {database.url}", title_justify="left")
    for name in ("id", "name", "status", "created", "finished", "configurations", "error"):
        table.add_column(name)
    for job in database.list_jobs(limit):
        counts = database.configuration_counts(job.spec_fingerprint)
        done = counts.get("done", 0)
        total = sum(counts.values())
        table.add_row(
            str(job.id), job.name, job.status, _when(job.created_at), _when(job.finished_at),
            f"{done}/{total} done", (job.error or "")[:60],
        )  # fmt: skip
    console.print(table)


def _when(moment) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else "-"
