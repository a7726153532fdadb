"""`llmcap search ...` and `llmcap jobs ...`: run, validate, submit and follow search jobs."""

from __future__ import annotations

import shlex
import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from search._cli_common import db_option, emit_records, open_db, records_options, user_errors
from search._upload import DEFAULT_MAX_BYTES

console = Console()  # made again when a command group runs (`_fresh_console`)


def _fresh_console() -> None:
    """A console for this invocation: rich reads the terminal's width (COLUMNS) when a console
    is made, and a module outlives one command when several run in one process."""
    global console
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
    _fresh_console()


max_configurations_option = click.option(
    "--max-configurations",
    type=click.IntRange(min=1),
    default=None,
    help="Allow a space of this many configurations (overrides the spec's max_configurations, "
    "default 100,000).",
)


@search_group.command("validate")
@click.argument("spec_file", type=click.Path(dir_okay=False, path_type=Path))
@max_configurations_option
@user_errors
def validate(spec_file: Path, max_configurations: int | None) -> None:
    """Check a spec as `search run` does, and show how many configurations it holds and
    which cannot run.  Exit status 2 when the spec is invalid or nothing in it can run."""
    from estimators import variant_note
    from search._errors import SpecError
    from search._space import candidates
    from search._spec import load_spec, search_workload, slo_semantics

    spec = load_spec(spec_file, max_configurations=max_configurations)
    cands = candidates(spec)
    workload = search_workload(spec)  # reads the trace, draws the lengths: as `run` does
    feasible = [c for c in cands if c.feasible]
    console.print(f"[bold]{spec_file}[/bold]: {spec.name!r}, model {spec.model}")
    note = variant_note(spec.model)
    if note:
        console.print(f"  {note}")
    console.print(f"workload: {spec.workload.source}, {len(workload):,} requests per probe")
    console.print(f"SLOs: {slo_semantics(spec)}")
    console.print(
        f"{len(cands)} configurations: {len(feasible)} feasible, "
        f"{len(cands) - len(feasible)} dropped before simulation"
    )
    reasons = _infeasible_reasons(cands)
    for kind, (count, example) in reasons.items():
        console.print(f"  {count:4d} {kind}  e.g. {example}")
    # what decides results (reused across specs that share it), and the whole spec (two specs
    # that differ anywhere, name, budget and strategy included, differ here)
    console.print(
        f"spec fingerprint {spec.fingerprint()[:16]} (what decides results); "
        f"whole spec {spec.digest()[:16]}"
    )
    if feasible:
        console.print(f"valid: {len(feasible)} configurations to simulate")
    else:
        counts = ", ".join(f"{count} {kind}" for kind, (count, _) in reasons.items())
        raise SpecError(
            f"{spec_file}: none of its {len(cands)} configurations can run ({counts}); "
            "widen the budget (budget.max_gpus), the space (tp, pp, skus) or "
            "gpu_memory_utilization"
        )


def _infeasible_reasons(cands) -> dict[str, tuple[int, str]]:
    """Why configurations were dropped: reason kind -> (how many, one example)."""
    counts = Counter(c.infeasible_reason.split(":")[0] for c in cands if not c.feasible)
    out: dict[str, tuple[int, str]] = {}
    for kind, count in sorted(counts.items()):
        example = next(
            c for c in cands if c.infeasible_reason and c.infeasible_reason.startswith(kind)
        )
        out[kind] = (count, f"{example.point.label()}: {example.infeasible_reason}")
    return out


@search_group.command("schema")
@click.option(
    "--markdown", is_flag=True,
    help="The reference as Markdown tables (docs/spec.md) instead of JSON Schema.",
)  # fmt: skip
def schema(markdown: bool) -> None:
    """Print the search spec's reference: every field, its type, default and meaning.

    \b
    JSON Schema by default (for editors and validators); --markdown gives docs/spec.md.
      llmcap search schema > spec.schema.json
      llmcap search schema --markdown
    """
    import json

    from search._spec_reference import spec_json_schema, spec_markdown

    if markdown:
        click.echo(spec_markdown(), nl=False)
    else:
        click.echo(json.dumps(spec_json_schema(), indent=2))


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
@max_configurations_option
@click.option(
    "--progress-every", type=click.FloatRange(min=0.0), default=None, metavar="SECONDS",
    help="Off a terminal (a pipe, `search logs`, cron), print a progress line this often "
    "[10, or LLMCAP_PROGRESS_EVERY]; on a terminal a live bar shows it.",
)  # fmt: skip
@user_errors
def run(
    spec_file: Path, db: str | None, executor: str, address: str | None, workers: int | None,
    resume_job: int | None, max_configurations: int | None, progress_every: float | None,
) -> None:  # fmt: skip
    """Run a search job in the foreground and store its results.

    Configurations already evaluated for the same spec (in this database) are reused,
    so running a spec again, or after an interruption, continues where it stopped.
    Several drivers may share one database: a configuration another running driver is
    evaluating is waited for, not simulated twice.  Ctrl-C or SIGTERM (`search cancel`)
    stops the job and records it cancelled; finished results stay.
    """
    from search._driver import JobCancelled, SearchDriver
    from search._progress import job_progress
    from search._results_view import print_best
    from search._spec import load_spec

    spec = load_spec(spec_file, max_configurations=max_configurations)
    database = open_db(db)
    driver = SearchDriver(spec, database, executor, address, workers)
    if resume_job is not None:
        driver.check_resumable(resume_job)
    with job_progress(console, progress_every) as show:
        driver.on_progress = show
        try:
            with _sigterm_raises(JobCancelled):
                report = driver.run(resume_job)
        except JobCancelled:
            console.print("[yellow]cancelled[/yellow]: stopped by SIGTERM; finished results kept")
            raise SystemExit(EXIT_CANCELLED) from None
        except KeyboardInterrupt:
            console.print("[yellow]cancelled[/yellow]: interrupted; finished results kept")
            raise SystemExit(EXIT_CANCELLED) from None
    shared = f"{report.shared} from another driver, " if report.shared else ""
    console.print(
        f"job {report.job_id} {report.status}: {report.evaluated} evaluated, "
        f"{report.refined} refined ({report.simulations} simulations), {report.cached} reused, "
        f"{shared}{report.failed} failed, "
        f"{report.infeasible} infeasible, {report.over_budget} over budget, "
        f"{report.wall_time_s:.1f} s"
    )
    for error in report.errors[:5]:
        console.print(f"[red]failed[/red] {error}")
    if report.pruned:
        console.print(
            f"{len(report.pruned)} pruned (strategy.prune: they cannot beat the best, so they "
            "have no result and the frontiers leave them out), e.g. " + report.pruned[0]
        )
    _note_unloaded(database, report.job_id, spec.workload.num_requests)
    print_best(database, report.job_id, console)


EXIT_CANCELLED = 130  # as a shell reports a job stopped by a signal


@contextmanager
def _sigterm_raises(error: type[BaseException]) -> Iterator[None]:
    """SIGTERM (`search cancel`, Ray's job stop, systemd, Kubernetes) raises `error` in the
    main thread, and Ctrl-C KeyboardInterrupt, so the job is recorded cancelled and its
    workers are shut down; neither lands inside a database transaction."""
    from search._interrupts import raise_or_defer

    def on_term(signum: int, frame: object) -> None:
        raise_or_defer(error())

    def on_int(signum: int, frame: object) -> None:
        raise_or_defer(KeyboardInterrupt())

    previous = signal.signal(signal.SIGTERM, on_term), signal.signal(signal.SIGINT, on_int)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])


def _note_unloaded(database, job_id: int, num_requests: int) -> None:
    """Say when some capacities rest on the analytic ceiling, not on a measurement.

    Those configurations met the SLO at every rate probed up to their ceiling even on the
    longest workload the search lengthened to (capacity_kind "ceiling"); `num_requests`
    is the spec's workload.num_requests, where each search started.
    """
    from search._capacity_kind import CAPACITY_CEILING
    from search._pareto import capacity_kinds

    frame = database.results(job_id, status="done")
    unloaded = frame[(capacity_kinds(frame) == CAPACITY_CEILING) & frame["capacity_qps"].notna()]
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
    help="Database the driver on the cluster writes to; default: the head's LLMCAP_DB. "
    "A password in it is removed before anything is sent (see --db-password-env).",
)  # fmt: skip
@click.option(
    "--db-password-env", default=None, metavar="NAME",
    help="Environment variable on the head that holds the database password (set there "
    "from a secret); without it, the head's LLMCAP_DB (same database and user) or PGPASSWORD.",
)  # fmt: skip
@click.option(
    "--exclude", "excludes", multiple=True, metavar="PATTERN",
    help="Do not upload files matching this .gitignore-style pattern (repeatable); "
    ".gitignore and .rayignore files in the folder are honoured too.",
)  # fmt: skip
@click.option(
    "--include-dotfiles", is_flag=True,
    help="Upload dotfiles and dot-folders too (.env, .cache/ ...; never .git).",
)  # fmt: skip
@click.option(
    "--max-upload-mb", type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_MAX_BYTES / 2**20, show_default=True,
    help="Refuse to upload more than this.",
)  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Show what would be sent; submit nothing.")
@user_errors
def submit(
    spec_file: Path, address: str, db: str | None, db_password_env: str | None,
    excludes: tuple[str, ...], include_dotfiles: bool, max_upload_mb: float, dry_run: bool,
) -> None:  # fmt: skip
    """Submit a search job to a Ray cluster (Ray Jobs API) and print its id.

    \b
    The spec's folder is uploaded as the job's working directory, without dotfiles
    (.env, .git/ ...) and without what .gitignore, .rayignore or --exclude leave out;
    the files the spec names (a trace, a catalog) always go.  The list is printed first.
    The driver runs on the head and writes to --db, or to the head's LLMCAP_DB (deploy/kuberay
    sets it from a secret).  Anyone who can reach the cluster can read a job's command line,
    so no password is ever put in it: a password in --db is removed, and the driver takes it
    from the head's environment (--db-password-env NAME, LLMCAP_DB or PGPASSWORD).  Follow
    the job with `llmcap search status|logs ID --address ...`.
    """
    import tempfile

    from search._ray_jobs import submit_job
    from search._upload import describe, plan_upload, stage

    spec_file = spec_file.resolve()  # a link: its target's folder is what is uploaded
    entrypoint, env_vars, notes = _driver_command(spec_file.name, db, db_password_env)
    plan = plan_upload(
        spec_file, excludes, include_dotfiles=include_dotfiles,
        max_bytes=int(max_upload_mb * 2**20),
    )  # fmt: skip
    for line in describe(plan):
        click.echo(line, err=True)
    for line in notes:
        click.echo(f"note: {line}", err=True)
    if dry_run:
        click.echo(f"entrypoint: {entrypoint}", err=True)
        if env_vars:
            click.echo(f"environment: {env_vars}", err=True)
        click.echo("dry run: nothing submitted", err=True)
        return
    with tempfile.TemporaryDirectory(prefix="llmcap-upload-") as staging:
        stage(plan, Path(staging))
        job_id = submit_job(address, entrypoint, Path(staging), env_vars)
    click.echo(job_id)


def _driver_command(
    spec_name: str, db: str | None, db_password_env: str | None
) -> tuple[str, dict[str, str], list[str]]:
    """The driver's entrypoint and environment, which carry no password, and notes for the
    user on where the driver's database and its password come from."""
    import re

    from search._db import mask_url
    from search._db.connect import ENV_VAR, PASSWORD_ENV_VAR, without_password

    entrypoint = f"llmcap search run {shlex.quote(spec_name)} --address auto"
    env_vars: dict[str, str] = {}
    notes = []
    if db_password_env is not None:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", db_password_env):
            raise click.BadParameter(
                f"{db_password_env!r} is not an environment variable name",
                param_hint="--db-password-env",
            )
        env_vars[PASSWORD_ENV_VAR] = db_password_env
    if db:
        sent, had_password = without_password(db)
        entrypoint += f" --db {shlex.quote(sent)}"
        if had_password:
            source = (
                f"the head's {db_password_env}" if db_password_env
                else f"the head's {ENV_VAR} when it names the same database and user, or "
                "PGPASSWORD / ~/.pgpass there (or name a variable with --db-password-env)"
            )  # fmt: skip
            notes.append(
                f"the password in --db was removed before submitting (a job's command line "
                f"is visible to everyone who can reach the cluster); the driver connects to "
                f"{mask_url(sent)} with the password from {source}"
            )
        else:
            notes.append(f"the driver writes to {mask_url(sent)}")
    else:
        notes.append(
            f"no --db: the driver writes to the head's {ENV_VAR}; where the head has none, "
            "to results.db in the job's temporary working directory on the head"
        )
    return entrypoint, env_vars, notes


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
    _fresh_console()


@jobs_group.command("list")
@db_option
@click.option("--limit", type=int, default=20, show_default=True)
@records_options
@click.option("--wide", is_flag=True, help="Also when each job finished, and its error.")
@user_errors
def jobs_list(db: str | None, limit: int, fmt: str | None, wide: bool) -> None:
    """Recent jobs, newest first, with the time a running one has left at its pace so far."""
    from datetime import UTC, datetime

    from search._cli_common import print_table
    from search._db.store import job_state
    from search._progress import eta_seconds, format_duration

    database = open_db(db, create=False)
    rows = []
    now = datetime.now(UTC)
    for job in database.list_jobs(limit):
        counts = database.configuration_counts(job.id)
        done, total = counts.get("done", 0), sum(counts.values())
        state = job_state(job)
        eta = None
        if state == "running" and job.created_at is not None:
            created = job.created_at
            created = created if created.tzinfo else created.replace(tzinfo=UTC)
            eta = eta_seconds((now - created).total_seconds(), done, total)
        rows.append({
            "id": job.id, "name": job.name, "status": state,
            "created": _when(job.created_at), "finished": _when(job.finished_at),
            "done": done, "configurations": total,
            "eta_s": None if eta is None else round(eta, 1), "error": job.error or "",
        })  # fmt: skip
    if fmt:
        emit_records(rows, fmt)
        return
    from rich import box

    table = Table(title=f"Jobs in {database.url}", title_justify="left", box=box.SIMPLE_HEAD)
    names = ["id", "name", "status", "created", "configurations", "ETA"]
    names += ["finished", "error"] if wide else []
    for name in names:
        table.add_column(name, no_wrap=name in ("id", "created", "finished", "ETA"))
    for row in rows:
        eta = "-" if row["eta_s"] is None else format_duration(row["eta_s"])
        cells = [str(row["id"]), row["name"], row["status"], row["created"],
                 f"{row['done']}/{row['configurations']} done", eta]  # fmt: skip
        cells += [row["finished"], row["error"]] if wide else []
        table.add_row(*cells)
    print_table(table, whole=wide)
    for row in rows:
        if row["status"] == "interrupted":
            console.print(
                f"job {row['id']} is interrupted: its driver stopped sending heartbeats (killed, "
                f"or its machine went down). Continue it with `llmcap search run SPEC --resume "
                f"{row['id']}`; finished results are kept."
            )


def _when(moment) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else "-"
