"""The repository API over the results database.

The search driver is the only writer: it creates a job, registers the job's configurations,
asks which still need a capacity search, and records each answer (or failure) as it comes back.
The query commands (``llmcap results``, ``pareto``, ``plan``) only read.

Configurations are stored once per *spec fingerprint*: running a spec again, or resuming a job
whose driver was killed, registers the same configurations again, gets the same ids back, and
finds the ones already done. Nothing is simulated twice and nothing is lost. Each job records
which configurations belong to it (its space within its budget), and every answer for a job
(``results``, ``configuration_counts``, Pareto points) covers those only.

Several drivers may share one database. Every writing transaction takes the write lock up front
(SQLite ``BEGIN IMMEDIATE``, waiting up to the busy timeout); registration is an upsert that
tolerates a concurrent insert; and a driver *claims* a configuration before evaluating it, with a
lease its heartbeat renews (``claim``, ``heartbeat``), so two drivers of one spec share the work
and a dead driver's claims expire.

Every method opens its own short transaction; a ``Database`` holds only the engine.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import Engine, Select, delete, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from search._db.connect import (
    ENV_VAR,
    SQLITE_BUSY_TIMEOUT_S,
    check_connection,
    is_sqlite_file,
    make_engine,
    mask_url,
    parse_url,
    resolve_url,
)
from search._db.errors import DatabaseError
from search._db.models import (
    FINISHED_JOB_STATUSES,
    CapacityResult,
    Configuration,
    Job,
    JobConfiguration,
    ParetoPoint,
    PlanRun,
    utcnow,
)
from search._db.schema import current_revisions, ensure_schema, llmcap_version
from search._interrupts import critical_section

MAX_ATTEMPTS = 2  # a failing configuration is tried once more, then left failed
_IN_CHUNK = 500  # ids per IN (...) clause
LEASE_ENV_VAR = "LLMCAP_LEASE_S"
DEFAULT_LEASE_S = 60.0


def lease_seconds() -> float:
    """How long a driver's claims and heartbeat stay valid without renewal, in seconds.

    ``$LLMCAP_LEASE_S`` (default 60). The driver renews them every sixth of it; a job whose
    heartbeat is older than this shows as interrupted and its claims may be taken over. Every
    process sharing a database must agree on it.
    """
    raw = os.environ.get(LEASE_ENV_VAR, "").strip()
    if not raw:
        return DEFAULT_LEASE_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 1.0 <= value <= 86400.0):
        raise DatabaseError(
            f"{LEASE_ENV_VAR}={raw!r}: the driver lease must be a number of seconds in "
            f"[1, 86400] (default {DEFAULT_LEASE_S:g})"
        )
    return value


def job_state(job: Job, now: datetime | None = None, lease_s: float | None = None) -> str:
    """A job's status as users should see it: ``interrupted`` for a job marked running whose
    driver has sent no heartbeat within the lease (it was killed, or its machine died)."""
    if job.status != "running":
        return job.status
    beat = job.heartbeat_at or job.started_at
    limit = timedelta(seconds=lease_s if lease_s is not None else lease_seconds())
    if beat is None or (now or utcnow()) - beat > limit:
        return "interrupted"
    return "running"


@dataclass(slots=True, kw_only=True)
class ConfigRecord:
    """One configuration as the driver registers it.

    ``fingerprint`` is the sha256 hex of the canonical configuration (``fingerprint_of``);
    ``cost_per_hour`` is the price of the whole deployment (all its GPUs) in dollars per hour;
    ``params`` is the full configuration as a JSON-able mapping.
    """

    fingerprint: str
    sku: str
    tp: int
    pp: int
    replicas: int
    scheduler: str
    batch_size: int
    precision: str
    num_gpus: int
    cost_per_hour: float
    params: dict[str, Any]
    chunk_size: int | None = None
    max_tokens: int | None = None
    engine: str | None = None  # name@version of the engine profile
    feasible: bool = True
    infeasible_reason: str | None = None


@dataclass(slots=True, kw_only=True)
class ResultRecord:
    """What a capacity search returns for one configuration.

    Latencies in seconds, memory in GB, MFU/MBU as fractions; a metric that could not be
    measured is ``None`` (NaN is stored as ``None`` too). ``slo_detail`` maps each SLO filter to
    ``{"passed": bool, "value": float | None, ...}``.
    """

    capacity_qps: float
    qps_per_dollar: float
    num_simulations: int
    wall_time_s: float
    capacity_upper_qps: float | None = None  # smallest failing rate probed (None: none)
    tolerance: float | None = None  # relative tolerance the search ran at
    capacity_kind: str | None = None  # measured | ceiling (models.CAPACITY_KINDS)
    num_requests: int | None = None  # requests in the workload the capacity was searched on
    rejected_requests: int | None = None  # of those, refused by the deployment at capacity
    slo_passed: bool = False
    slo_detail: dict[str, Any] = field(default_factory=dict)
    cost_per_million_output_tokens: float | None = None
    ttft_p50: float | None = None
    ttft_p90: float | None = None
    ttft_p95: float | None = None
    ttft_p99: float | None = None
    tbt_p50: float | None = None
    tbt_p90: float | None = None
    tbt_p95: float | None = None
    tbt_p99: float | None = None
    tpot_p50: float | None = None
    tpot_p90: float | None = None
    tpot_p99: float | None = None
    e2e_p50: float | None = None
    e2e_p90: float | None = None
    e2e_p99: float | None = None
    scheduling_delay_p99: float | None = None
    throughput_tokens_per_s: float | None = None
    throughput_requests_per_s: float | None = None
    mfu: float | None = None
    mbu: float | None = None
    kv_capacity_tokens: int | None = None
    weights_gb_per_gpu: float | None = None


@dataclass(slots=True, frozen=True)
class StoredConfiguration:
    """A registered configuration and where its evaluation stands."""

    id: int
    job_id: int  # the job that registered it first
    spec_fingerprint: str
    status: str  # pending | done | failed | infeasible
    attempts: int
    error: str | None
    record: ConfigRecord


def fingerprint_of(data: Mapping[str, Any] | str) -> str:
    """sha256 hex of a mapping's canonical JSON (sorted keys, no spaces), or of a string."""
    if not isinstance(data, str):
        data = json.dumps(_jsonable(data), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()


def open_database(url: str | None = None, *, echo: bool = False, create: bool = True) -> Database:
    """Open the results database, creating or upgrading its schema as needed.

    ``url``: a SQLAlchemy URL or a SQLite file path; default ``$LLMCAP_DB``, else
    ``sqlite:///results.db``. Raises ``DatabaseError`` (with a message for the user) when the
    database cannot be reached, or holds a schema this code does not know.  With
    ``create=False`` (commands that only read) a SQLite file that does not exist is an error
    instead of a new empty database.
    """
    parsed = parse_url(resolve_url(url))
    if not create:
        _require_existing(parsed)
    engine = make_engine(parsed, wal=False, echo=echo)
    try:
        check_connection(engine)
        ensure_schema(engine)
    except BaseException:
        engine.dispose()
        raise
    if is_sqlite_file(parsed):
        # the schema is ours: from now on every connection turns WAL on (persistent per file)
        engine.dispose()
        engine = make_engine(parsed, wal=True, echo=echo)
        check_connection(engine)
    return Database(engine)


def _require_existing(url: URL) -> None:
    """Refuse a SQLite file that does not exist (there is nothing to read in it)."""
    if not is_sqlite_file(url) or url.query.get("uri") or str(url.database).startswith("file:"):
        return
    path = Path(str(url.database))
    try:
        exists = path.is_file()
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise DatabaseError(f"cannot use the SQLite database {mask_url(url)}: {reason}") from None
    if not exists:
        raise DatabaseError(
            f"no results database at {path} ({mask_url(url)}): nothing to read there. Run a "
            f"search first (llmcap search run SPEC), or point --db (or {ENV_VAR}) at the "
            "database that holds your results."
        )


class Database:
    """Repository over one results database. Build it with ``open_database``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.url = mask_url(engine.url)  # for messages: password masked
        self._reads = sessionmaker(engine, expire_on_commit=False)
        # SQLite: a writer takes the write lock at BEGIN, so it waits (busy timeout) for
        # another writer instead of failing when it later upgrades a read lock
        self._writes = sessionmaker(
            engine.execution_options(sqlite_begin="BEGIN IMMEDIATE"), expire_on_commit=False
        )

    def __repr__(self) -> str:
        return f"Database({self.url!r})"

    @property
    def shared_between_processes(self) -> bool:
        """False for an in-memory SQLite database (one process, one shared connection)."""
        url = self.engine.url
        return url.get_backend_name() != "sqlite" or is_sqlite_file(url)

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the connections."""
        self.engine.dispose()

    @contextmanager
    def _transaction(self, *, write: bool = True) -> Iterator[Session]:
        sessions = self._writes if write else self._reads
        try:  # a SIGTERM waits for the transaction's end (search._interrupts)
            with critical_section(), sessions() as session, session.begin():
                yield session
        except (OperationalError, InterfaceError) as exc:
            reason = str(getattr(exc, "orig", exc)).strip().splitlines()[0]
            hint = (
                f" Another process held its write lock for longer than {SQLITE_BUSY_TIMEOUT_S:g} s."
                if "locked" in reason
                else " Check that the database is still reachable and has free space."
            )
            raise DatabaseError(f"the results database {self.url} failed: {reason}.{hint}") from exc

    def revision(self) -> str | None:
        """The schema revision the database is at."""
        with self.engine.connect() as connection:
            revisions = current_revisions(connection)
        return revisions[0] if revisions else None

    # ---------------------------------------------------------------- jobs

    def create_job(
        self, name: str, spec_json: str, spec_fingerprint: str, *, ray_job_id: str | None = None
    ) -> Job:
        """A new job, status ``pending``."""
        job = Job(
            name=name,
            spec=spec_json,
            spec_fingerprint=spec_fingerprint,
            status="pending",
            created_at=utcnow(),
            ray_job_id=ray_job_id,
            llmcap_version=llmcap_version(),
        )
        with self._transaction() as session:
            session.add(job)
        return job

    def start_job(
        self, job_id: int, *, driver: str | None = None, ray_job_id: str | None = None
    ) -> Job:
        """Mark a job running (again, when it is resumed) by ``driver``, with a first heartbeat;
        keeps its first start time."""
        with self._transaction() as session:
            job = self._job(session, job_id)
            job.status = "running"
            job.started_at = job.started_at or utcnow()
            job.finished_at = None
            job.error = None
            job.driver = driver
            job.heartbeat_at = utcnow()
            if ray_job_id is not None:
                job.ray_job_id = ray_job_id
        return job

    def heartbeat(self, job_id: int, driver: str, lease_s: float) -> None:
        """The driver is alive: stamp its job's heartbeat and extend its claims' lease."""
        now = utcnow()
        with self._transaction() as session:
            session.execute(
                update(Job).where(Job.id == job_id, Job.driver == driver).values(heartbeat_at=now)
            )
            session.execute(
                update(Configuration)
                .where(Configuration.claimed_by == driver)
                .values(claim_expires_at=now + timedelta(seconds=lease_s))
            )

    def finish_job(self, job_id: int, status: str, error: str | None = None) -> Job:
        """Mark a job succeeded, failed or cancelled, with its error if any."""
        if status not in FINISHED_JOB_STATUSES:
            raise ValueError(
                f"finish status must be one of {FINISHED_JOB_STATUSES}, not {status!r}"
            )
        with self._transaction() as session:
            job = self._job(session, job_id)
            job.status = status
            job.finished_at = utcnow()
            job.error = error
        return job

    def latest_job(self, spec_fingerprint: str | None = None) -> Job | None:
        """The most recently created job (of one spec, if given), or None."""
        statement = select(Job).order_by(Job.id.desc()).limit(1)
        if spec_fingerprint is not None:
            statement = statement.where(Job.spec_fingerprint == spec_fingerprint)
        with self._transaction(write=False) as session:
            return session.scalars(statement).first()

    def get_job(self, job_id: int | None = None) -> Job:
        """A job by id; ``None`` means the latest. Unknown ids raise ``DatabaseError``."""
        with self._transaction(write=False) as session:
            if job_id is None:
                job = session.scalars(select(Job).order_by(Job.id.desc()).limit(1)).first()
                if job is None:
                    raise DatabaseError(
                        f"the results database {self.url} holds no jobs yet: run a search job "
                        f"first, or point --db at the database that holds your results."
                    )
                return job
            return self._job(session, job_id)

    def list_jobs(self, limit: int | None = 20) -> list[Job]:
        """Jobs, newest first."""
        statement = select(Job).order_by(Job.id.desc())
        if limit is not None:
            statement = statement.limit(limit)
        with self._transaction(write=False) as session:
            return list(session.scalars(statement))

    def _job(self, session: Session, job_id: int) -> Job:
        # ids beyond a 32-bit integer would be a driver error on PostgreSQL: simply unknown
        job = session.get(Job, job_id) if 0 < job_id < 2**31 else None
        if job is not None:
            return job
        recent = session.scalars(select(Job).order_by(Job.id.desc()).limit(5)).all()
        if not recent:
            raise DatabaseError(
                f"no job {job_id} in the results database {self.url}: it holds no jobs yet. "
                f"Check --db (or LLMCAP_DB) points at the database that holds your results."
            )
        listed = ", ".join(f"{job.id} ({job.name}, {job.status})" for job in recent)
        raise DatabaseError(
            f"no job {job_id} in the results database {self.url}. The most recent jobs are: "
            f"{listed}. Leave the job out to mean the latest one ({recent[0].id})."
        )

    # ------------------------------------------------------- configurations

    def register_configurations(
        self, job_id: int, spec_fingerprint: str, configs: Sequence[ConfigRecord]
    ) -> list[int]:
        """Register a job's configurations and make them the job's; returns their ids, in the
        order given.

        Idempotent, and safe beside another driver registering the same ones: a configuration
        already registered under the same spec fingerprint (by this job, an earlier one, or a
        concurrent one) keeps its row, status and result, and its id is returned.
        """
        unique = list({config.fingerprint: config for config in configs}.values())
        ids: dict[str, int] = {}
        with self._transaction() as session:
            self._job(session, job_id)
            for start in range(0, len(unique), _IN_CHUNK):
                chunk = unique[start : start + _IN_CHUNK]
                rows = [
                    {
                        "job_id": job_id,
                        "spec_fingerprint": spec_fingerprint,
                        "status": "pending" if config.feasible else "infeasible",
                        "attempts": 0,
                        **_config_values(config),
                    }
                    for config in chunk
                ]
                session.execute(
                    _insert_ignoring_duplicates(session, Configuration, ["spec_fingerprint",
                                                                         "fingerprint"]),
                    rows,
                )  # fmt: skip
                found = session.execute(
                    select(Configuration.fingerprint, Configuration.id).where(
                        Configuration.spec_fingerprint == spec_fingerprint,
                        Configuration.fingerprint.in_([config.fingerprint for config in chunk]),
                    )
                )
                ids.update({fingerprint: id_ for fingerprint, id_ in found})
                session.execute(
                    _insert_ignoring_duplicates(
                        session, JobConfiguration, ["job_id", "configuration_id"]
                    ),
                    [
                        {"job_id": job_id, "configuration_id": ids[config.fingerprint]}
                        for config in chunk
                    ],
                )
        return [ids[config.fingerprint] for config in configs]

    def pending_configurations(
        self, spec_fingerprint: str, *, max_attempts: int = MAX_ATTEMPTS
    ) -> list[StoredConfiguration]:
        """Configurations still to evaluate: pending, or failed fewer than ``max_attempts``
        times. Ordered by id (registration order)."""
        statement = (
            select(Configuration)
            .where(
                Configuration.spec_fingerprint == spec_fingerprint,
                (Configuration.status == "pending")
                | ((Configuration.status == "failed") & (Configuration.attempts < max_attempts)),
            )
            .order_by(Configuration.id)
        )
        with self._transaction(write=False) as session:
            return [_stored(row) for row in session.scalars(statement)]

    def configurations(
        self, spec_fingerprint: str, *, status: str | None = None
    ) -> list[StoredConfiguration]:
        """All configurations of a spec (with one status, if given), ordered by id."""
        statement = (
            select(Configuration)
            .where(Configuration.spec_fingerprint == spec_fingerprint)
            .order_by(Configuration.id)
        )
        if status is not None:
            statement = statement.where(Configuration.status == status)
        with self._transaction(write=False) as session:
            return [_stored(row) for row in session.scalars(statement)]

    def get_configuration(self, configuration_id: int) -> StoredConfiguration:
        with self._transaction(write=False) as session:
            return _stored(self._configuration(session, configuration_id))

    def get_configurations(self, configuration_ids: Sequence[int]) -> list[StoredConfiguration]:
        """Configurations by id, in the order given."""
        ids = [int(id_) for id_ in configuration_ids]
        rows: dict[int, StoredConfiguration] = {}
        with self._transaction(write=False) as session:
            for start in range(0, len(ids), _IN_CHUNK):
                chunk = ids[start : start + _IN_CHUNK]
                for row in session.scalars(
                    select(Configuration).where(Configuration.id.in_(chunk))
                ):
                    rows[row.id] = _stored(row)
        missing = [id_ for id_ in ids if id_ not in rows]
        if missing:
            raise ValueError(f"no configurations {missing[:10]} in {self.url}")
        return [rows[id_] for id_ in ids]

    def configuration_counts(self, job_id: int | None = None) -> dict[str, int]:
        """How many of a job's configurations (``None``: the latest job's) are in each status
        (all four keys present)."""
        job_id = self.get_job(job_id).id
        statement = (
            select(Configuration.status, func.count())
            .join(JobConfiguration, JobConfiguration.configuration_id == Configuration.id)
            .where(JobConfiguration.job_id == job_id)
            .group_by(Configuration.status)
        )
        counts = {"pending": 0, "done": 0, "failed": 0, "infeasible": 0}
        with self._transaction(write=False) as session:
            counts.update({status: count for status, count in session.execute(statement)})
        return counts

    def mark_refinement(self, configuration_ids: Sequence[int], tolerance: float) -> None:
        """Decide to refine these configurations to ``tolerance`` (kept until a result at that
        tolerance is recorded, or ``clear_refinement``)."""
        self._set_refine_to(configuration_ids, tolerance)

    def clear_refinement(self, configuration_ids: Sequence[int]) -> None:
        """Drop a decided refinement (it failed: the coarser result stands)."""
        self._set_refine_to(configuration_ids, None)

    def _set_refine_to(self, configuration_ids: Sequence[int], value: float | None) -> None:
        ids = [int(id_) for id_ in configuration_ids]
        with self._transaction() as session:
            for start in range(0, len(ids), _IN_CHUNK):
                session.execute(
                    update(Configuration)
                    .where(Configuration.id.in_(ids[start : start + _IN_CHUNK]))
                    .values(refine_to=value)
                )

    # ---------------------------------------------------------------- claims

    def claim(
        self, configuration_id: int, driver: str, lease_s: float, *, statuses: Sequence[str]
    ) -> bool:
        """Claim a configuration for ``driver`` while it is in one of ``statuses``; True if
        this driver holds the claim now.

        A claim held by another driver whose lease has not expired is refused; an expired one
        (its driver died) is taken over. ``heartbeat`` extends the lease; recording a result or
        a failure, or ``release_claims``, ends it.
        """
        now = utcnow()
        with self._transaction() as session:
            claimed = session.execute(
                update(Configuration)
                .where(
                    Configuration.id == configuration_id,
                    Configuration.status.in_(list(statuses)),
                    or_(
                        Configuration.claimed_by.is_(None),
                        Configuration.claimed_by == driver,
                        Configuration.claim_expires_at < now,
                    ),
                )
                .values(claimed_by=driver, claim_expires_at=now + timedelta(seconds=lease_s))
            )
            return claimed.rowcount == 1

    def release_claims(self, driver: str) -> int:
        """End every claim ``driver`` holds (it stops); returns how many."""
        with self._transaction() as session:
            released = session.execute(
                update(Configuration)
                .where(Configuration.claimed_by == driver)
                .values(claimed_by=None, claim_expires_at=None)
            )
            return released.rowcount

    def release_claim(self, configuration_id: int, driver: str) -> None:
        """End ``driver``'s claim on one configuration, its status unchanged (it was pruned)."""
        with self._transaction() as session:
            session.execute(
                update(Configuration)
                .where(Configuration.id == configuration_id, Configuration.claimed_by == driver)
                .values(claimed_by=None, claim_expires_at=None)
            )

    def record_result(self, configuration_id: int, result: ResultRecord) -> None:
        """Store a configuration's capacity result and mark it done, in one transaction.

        Idempotent: recording again replaces the values of the one result row.
        """
        values = _result_values(result)
        with self._transaction() as session:
            configuration = self._configuration(session, configuration_id)
            existing = session.scalars(
                select(CapacityResult).where(CapacityResult.configuration_id == configuration_id)
            ).first()
            if existing is None:
                session.add(CapacityResult(configuration_id=configuration_id, **values))
            else:
                for name, value in values.items():
                    setattr(existing, name, value)
                existing.created_at = utcnow()
            if configuration.status != "done":
                configuration.attempts += 1
            configuration.status = "done"
            configuration.error = None
            if configuration.refine_to is not None and (
                result.tolerance is not None and result.tolerance <= configuration.refine_to
            ):
                configuration.refine_to = None  # the refinement decided on is done
            configuration.claimed_by = None
            configuration.claim_expires_at = None

    def record_failure(self, configuration_id: int, error: str) -> int:
        """Count a failed attempt (status ``failed``, error kept); returns the attempts so far.

        A configuration already done stays done (a late failure of a duplicate task).
        """
        with self._transaction() as session:
            configuration = self._configuration(session, configuration_id)
            if configuration.status != "done":
                configuration.attempts += 1
                configuration.status = "failed"
                configuration.error = error
            configuration.claimed_by = None
            configuration.claim_expires_at = None
            return configuration.attempts

    def reset_failed(self, spec_fingerprint: str) -> int:
        """Give every failed configuration of a spec a fresh start (status pending, attempts
        0), e.g. after fixing what made them fail; returns how many."""
        with self._transaction() as session:
            rows = session.scalars(
                select(Configuration).where(
                    Configuration.spec_fingerprint == spec_fingerprint,
                    Configuration.status == "failed",
                )
            ).all()
            for row in rows:
                row.status = "pending"
                row.attempts = 0
                row.error = None
            return len(rows)

    def mark_infeasible(self, configuration_id: int, reason: str) -> None:
        """Mark a configuration infeasible (found out during its evaluation)."""
        with self._transaction() as session:
            configuration = self._configuration(session, configuration_id)
            configuration.feasible = False
            configuration.infeasible_reason = reason
            configuration.status = "infeasible"

    def _configuration(self, session: Session, configuration_id: int) -> Configuration:
        configuration = session.get(Configuration, configuration_id)
        if configuration is None:
            raise ValueError(f"no configuration {configuration_id} in {self.url}")
        return configuration

    # -------------------------------------------------------------- results

    def results(
        self,
        job_id: int | None = None,
        *,
        sku: str | Sequence[str] | None = None,
        scheduler: str | Sequence[str] | None = None,
        slo_passed: bool | None = None,
        feasible: bool | None = None,
        status: str | Sequence[str] | None = None,
    ) -> pd.DataFrame:
        """A job's configurations (``None``: the latest job) joined with their results, best
        QPS/$ first.

        A job's configurations are those of its own space within its budget; their results may
        have been found by an earlier job of the same spec. Configurations without a result
        (pending, failed, infeasible) have empty metric columns; ``slo_passed`` given keeps only
        configurations with a result.
        """
        job_id = self.get_job(job_id).id
        statement = (
            _joined()
            .join(JobConfiguration, JobConfiguration.configuration_id == Configuration.id)
            .where(JobConfiguration.job_id == job_id)
        )
        for column, wanted in (
            (Configuration.sku, sku),
            (Configuration.scheduler, scheduler),
            (Configuration.status, status),
        ):
            if wanted is not None:
                statement = statement.where(
                    column.in_([wanted] if isinstance(wanted, str) else wanted)
                )
        if feasible is not None:
            statement = statement.where(Configuration.feasible.is_(feasible))
        if slo_passed is not None:
            statement = statement.where(CapacityResult.slo_passed.is_(slo_passed))
        frame = self._frame(statement)
        frame.insert(0, "job_id", job_id)
        return frame.sort_values(
            ["qps_per_dollar", "configuration_id"],
            ascending=[False, True],
            na_position="last",
            kind="stable",
        ).reset_index(drop=True)

    def replace_pareto(self, job_id: int, frontier: str, configuration_ids: Sequence[int]) -> None:
        """Replace one frontier of a job by these configurations, in order along it."""
        ids = [int(id_) for id_ in configuration_ids]
        if len(set(ids)) != len(ids):
            raise ValueError(f"frontier {frontier!r} lists a configuration twice: {ids}")
        with self._transaction() as session:
            self._job(session, job_id)
            found: set[int] = set()
            for start in range(0, len(ids), _IN_CHUNK):
                chunk = ids[start : start + _IN_CHUNK]
                found.update(
                    session.scalars(select(Configuration.id).where(Configuration.id.in_(chunk)))
                )
            missing = [id_ for id_ in ids if id_ not in found]
            if missing:
                raise ValueError(f"frontier {frontier!r}: no configurations {missing}")
            session.execute(
                delete(ParetoPoint).where(
                    ParetoPoint.job_id == job_id, ParetoPoint.frontier == frontier
                )
            )
            session.add_all(
                ParetoPoint(job_id=job_id, frontier=frontier, configuration_id=id_, rank=rank)
                for rank, id_ in enumerate(ids)
            )

    def pareto_points(self, job_id: int | None = None, frontier: str | None = None) -> pd.DataFrame:
        """A job's Pareto points (``None``: the latest job), with configuration and result
        columns, ordered by frontier and rank."""
        job_id = self.get_job(job_id).id
        statement = (
            _joined(ParetoPoint.job_id, ParetoPoint.frontier, ParetoPoint.rank)
            .join(ParetoPoint, ParetoPoint.configuration_id == Configuration.id)
            .where(ParetoPoint.job_id == job_id)
            .order_by(ParetoPoint.frontier, ParetoPoint.rank)
        )
        if frontier is not None:
            statement = statement.where(ParetoPoint.frontier == frontier)
        return self._frame(statement)

    # ------------------------------------------------------------ plan runs

    def record_plan_run(self, run: PlanRun) -> PlanRun:
        """Store one run of a capacity plan (written once, never updated)."""
        with self._transaction() as session:
            session.add(run)
        return run

    def plan_runs(self, plan_name: str, limit: int | None = 20) -> list[PlanRun]:
        """The runs of a plan, newest first."""
        statement = (
            select(PlanRun).where(PlanRun.plan_name == plan_name)
            .order_by(PlanRun.id.desc()).limit(limit)
        )  # fmt: skip
        with self._transaction(write=False) as session:
            return list(session.scalars(statement))

    def get_plan_run(self, run_id: int) -> PlanRun:
        with self._transaction(write=False) as session:
            run = session.get(PlanRun, run_id)
        if run is None:
            raise DatabaseError(f"no plan run {run_id} in {self.url}; `llmcap plan history "
                                "PLAN` lists the runs of a plan")  # fmt: skip
        return run

    def _frame(self, statement: Select[Any]) -> pd.DataFrame:
        with self._transaction(write=False) as session:
            result = session.execute(statement)
            frame = pd.DataFrame(result.all(), columns=list(result.keys()))
        return _typed(frame)


# ------------------------------------------------------------------ helpers


def _insert_ignoring_duplicates(session: Session, model: type, keys: list[str]) -> Any:
    """INSERT ... ON CONFLICT (keys) DO NOTHING, on PostgreSQL and SQLite alike: a row another
    process inserted meanwhile is kept, not an error."""
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    return dialect.insert(model).on_conflict_do_nothing(index_elements=keys)


_CONFIG_COLUMNS = (
    "configuration_id",
    "job_id",
    "spec_fingerprint",
    "fingerprint",
    "sku",
    "tp",
    "pp",
    "replicas",
    "scheduler",
    "batch_size",
    "chunk_size",
    "max_tokens",
    "precision",
    "engine",
    "num_gpus",
    "cost_per_hour",
    "feasible",
    "infeasible_reason",
    "status",
    "attempts",
    "error",
    "params",
    "refine_to",
)
_RESULT_COLUMNS = tuple(f.name for f in fields(ResultRecord))


def _config_column(name: str) -> Any:
    if name == "configuration_id":
        return Configuration.id.label("configuration_id")
    if name == "job_id":  # the job asked about is `job_id`; this is who registered it first
        return Configuration.job_id.label("registered_by_job")
    return getattr(Configuration, name)


def _joined(*leading: Any) -> Select[Any]:
    """Configuration columns left-joined with result columns (and ``leading`` first)."""
    config_columns = [_config_column(name) for name in _CONFIG_COLUMNS]
    result_columns = [getattr(CapacityResult, name) for name in _RESULT_COLUMNS]
    return select(
        *leading,
        *config_columns,
        *result_columns,
        CapacityResult.created_at.label("result_created_at"),
    ).outerjoin(CapacityResult, CapacityResult.configuration_id == Configuration.id)


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Stable dtypes whatever the rows: float64 metrics (NaN when missing), nullable Int64 and
    boolean where a value may be missing, UTC datetimes."""
    for name in frame.columns:
        if name == "result_created_at":
            frame[name] = pd.to_datetime(frame[name], utc=True)
            continue
        if name == "rank":
            frame[name] = frame[name].astype("int64")
            continue
        table = Configuration.__table__ if name in _CONFIG_COLUMNS else CapacityResult.__table__
        if name == "configuration_id" or name not in table.c:
            continue
        column = table.c[name]
        # result columns come through a left join: any of them may be missing
        nullable = column.nullable or table is CapacityResult.__table__
        try:
            python_type = column.type.python_type
        except NotImplementedError:
            continue
        if python_type is float:
            frame[name] = frame[name].astype("float64")
        elif python_type is bool:
            frame[name] = frame[name].astype("boolean" if nullable else "bool")
        elif python_type is int:
            frame[name] = frame[name].astype("Int64" if nullable else "int64")
    return frame


def _plain(value: Any) -> Any:
    """numpy scalars to Python ones, NaN to None: what every driver can bind."""
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _jsonable(value: Any) -> Any:
    """A JSON-safe copy: numpy scalars/arrays to Python, tuples to lists, non-finite floats to
    None (PostgreSQL's JSONB rejects NaN)."""
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(item) for item in value]
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):
        return _jsonable(value.tolist())
    value = _plain(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _config_values(config: ConfigRecord) -> dict[str, Any]:
    values = {name: _plain(value) for name, value in asdict(config).items()}
    values["params"] = _jsonable(config.params)
    return values


def _result_values(result: ResultRecord) -> dict[str, Any]:
    values = {name: _plain(getattr(result, name)) for name in _RESULT_COLUMNS}
    values["slo_detail"] = _jsonable(result.slo_detail)
    for required in ("capacity_qps", "qps_per_dollar", "num_simulations", "wall_time_s"):
        if values[required] is None:
            raise ValueError(f"result field {required} is missing (None or NaN)")
    values["slo_passed"] = bool(values["slo_passed"])
    return values


def _stored(row: Configuration) -> StoredConfiguration:
    record = ConfigRecord(
        fingerprint=row.fingerprint,
        sku=row.sku,
        tp=row.tp,
        pp=row.pp,
        replicas=row.replicas,
        scheduler=row.scheduler,
        batch_size=row.batch_size,
        precision=row.precision,
        num_gpus=row.num_gpus,
        cost_per_hour=row.cost_per_hour,
        params=dict(row.params),
        chunk_size=row.chunk_size,
        max_tokens=row.max_tokens,
        engine=row.engine,
        feasible=row.feasible,
        infeasible_reason=row.infeasible_reason,
    )
    return StoredConfiguration(
        id=row.id,
        job_id=row.job_id,
        spec_fingerprint=row.spec_fingerprint,
        status=row.status,
        attempts=row.attempts,
        error=row.error,
        record=record,
    )
