"""The results schema: SQLAlchemy 2 typed declarative models.

Five tables:

- ``jobs``: one search job (a spec run once, possibly resumed), with its driver's heartbeat.
- ``configurations``: one deployment configuration of a spec. A configuration is identified by
  ``(spec_fingerprint, fingerprint)``, not by job: a later job of the same spec finds the
  configurations (and results) an earlier one already evaluated and does not simulate them again.
  ``job_id`` is the job that registered the configuration first; ``claimed_by`` and
  ``claim_expires_at`` are the lease of the driver evaluating it now (drivers of one spec share
  the work; a dead driver's claims expire); ``refine_to`` marks a refinement decided and not yet
  done.
- ``job_configurations``: which configurations belong to each job (its space within its budget).
  Every answer for a job covers these only.
- ``capacity_results``: the capacity search's answer for one configuration (at most one row).
- ``pareto_points``: the Pareto frontiers of one job, one row per point, ordered by ``rank``.

Any change here needs a new migration in ``migrations/versions/`` (written by hand; the test
suite checks that the migrations and these models agree).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from search._capacity_kind import CAPACITY_CEILING, CAPACITY_MEASURED

JOB_STATUSES = ("pending", "running", "succeeded", "failed", "cancelled")
FINISHED_JOB_STATUSES = ("succeeded", "failed", "cancelled")
CONFIGURATION_STATUSES = ("pending", "done", "failed", "infeasible")
# a capacity found by simulation (the bracket's failing rate was probed, or no rate passed), or
# one resting on the analytic throughput ceiling (the workload never loaded the deployment)
CAPACITY_KINDS = (CAPACITY_MEASURED, CAPACITY_CEILING)

# constraint names are fixed by convention so later migrations (and SQLite batch mode) can
# refer to them by name
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that is always timezone-aware UTC in Python.

    PostgreSQL stores ``timestamp with time zone``; SQLite has no time zones, so the value is
    stored as naive UTC and marked UTC again when read. Naive datetimes are refused on write.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: pass a timezone-aware datetime")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


# JSON documents: JSONB on PostgreSQL (indexable, compact), JSON text elsewhere
JSONDocument = JSON().with_variant(JSONB(), "postgresql")


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    """Declarative base of the results schema."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Job(Base):
    """One search job: a validated spec, its status and timings."""

    __tablename__ = "jobs"
    __table_args__ = (CheckConstraint(_in("status", JOB_STATUSES), name="status"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    spec: Mapped[str] = mapped_column(Text)  # JSON text of the validated spec
    spec_fingerprint: Mapped[str] = mapped_column(String(64), index=True)  # sha256 hex
    status: Mapped[str] = mapped_column(String(16), default="pending")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    error: Mapped[str | None] = mapped_column(Text)
    ray_job_id: Mapped[str | None] = mapped_column(String(128))
    llmcap_version: Mapped[str] = mapped_column(String(64))
    driver: Mapped[str | None] = mapped_column(String(128))  # host:pid of the running driver
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime())  # the driver's last

    def __repr__(self) -> str:
        return f"Job(id={self.id!r}, name={self.name!r}, status={self.status!r})"


class Configuration(Base):
    """One deployment configuration of a spec, and where its evaluation stands."""

    __tablename__ = "configurations"
    __table_args__ = (
        UniqueConstraint("spec_fingerprint", "fingerprint"),
        Index(None, "spec_fingerprint", "status"),
        CheckConstraint(_in("status", CONFIGURATION_STATUSES), name="status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"), index=True)
    spec_fingerprint: Mapped[str] = mapped_column(String(64))
    fingerprint: Mapped[str] = mapped_column(String(64))  # sha256 of the canonical configuration
    sku: Mapped[str] = mapped_column(String(64))
    tp: Mapped[int] = mapped_column(Integer)
    pp: Mapped[int] = mapped_column(Integer)
    replicas: Mapped[int] = mapped_column(Integer)
    scheduler: Mapped[str] = mapped_column(String(32))
    batch_size: Mapped[int] = mapped_column(Integer)
    chunk_size: Mapped[int | None] = mapped_column(Integer)
    max_tokens: Mapped[int | None] = mapped_column(Integer)
    precision: Mapped[str] = mapped_column(String(16))
    # the engine profile (name@version); NULL for configurations stored before engine profiles,
    # which were all simulated as vidur@2024
    engine: Mapped[str | None] = mapped_column(String(64))
    num_gpus: Mapped[int] = mapped_column(Integer)
    cost_per_hour: Mapped[float] = mapped_column(Float)  # whole deployment, dollars per hour
    params: Mapped[dict[str, Any]] = mapped_column(JSONDocument)  # the full configuration
    feasible: Mapped[bool] = mapped_column(Boolean, default=True)
    infeasible_reason: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text)
    claimed_by: Mapped[str | None] = mapped_column(String(128))  # the driver evaluating it
    claim_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # a refinement decided but not yet stored: search the capacity again to this tolerance
    # (kept in the database so a job resumed after a kill finishes the same refinements)
    refine_to: Mapped[float | None] = mapped_column(Float)

    def __repr__(self) -> str:
        return (
            f"Configuration(id={self.id!r}, sku={self.sku!r}, tp={self.tp!r}, pp={self.pp!r}, "
            f"scheduler={self.scheduler!r}, status={self.status!r})"
        )


class JobConfiguration(Base):
    """A configuration that belongs to a job: in its space and within its budget."""

    __tablename__ = "job_configurations"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    configuration_id: Mapped[int] = mapped_column(
        ForeignKey("configurations.id", ondelete="CASCADE"), primary_key=True, index=True
    )


class CapacityResult(Base):
    """The capacity found for one configuration and the metrics measured at that rate.

    Latencies are in seconds, memory in GB, MFU/MBU as fractions of the SKU's peaks.
    """

    __tablename__ = "capacity_results"
    __table_args__ = (CheckConstraint(_in("capacity_kind", CAPACITY_KINDS), name="capacity_kind"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    configuration_id: Mapped[int] = mapped_column(
        ForeignKey("configurations.id", ondelete="CASCADE"), unique=True
    )
    capacity_qps: Mapped[float] = mapped_column(Float)
    # the smallest rate probed that failed (NULL: none, or not recorded): the true capacity
    # lies in [capacity_qps, capacity_upper_qps)
    capacity_upper_qps: Mapped[float | None] = mapped_column(Float)
    tolerance: Mapped[float | None] = mapped_column(Float)  # relative, the search ran at
    # measured | ceiling (see CAPACITY_KINDS); NULL for results stored before revision 0003
    capacity_kind: Mapped[str | None] = mapped_column(String(16))
    num_requests: Mapped[int | None] = mapped_column(Integer)  # requests in the runs searched
    rejected_requests: Mapped[int | None] = mapped_column(Integer)  # refused at that rate
    qps_per_dollar: Mapped[float] = mapped_column(Float)
    cost_per_million_output_tokens: Mapped[float | None] = mapped_column(Float)
    ttft_p50: Mapped[float | None] = mapped_column(Float)
    ttft_p90: Mapped[float | None] = mapped_column(Float)
    ttft_p95: Mapped[float | None] = mapped_column(Float)
    ttft_p99: Mapped[float | None] = mapped_column(Float)
    tbt_p50: Mapped[float | None] = mapped_column(Float)
    tbt_p90: Mapped[float | None] = mapped_column(Float)
    tbt_p95: Mapped[float | None] = mapped_column(Float)
    tbt_p99: Mapped[float | None] = mapped_column(Float)
    tpot_p50: Mapped[float | None] = mapped_column(Float)
    tpot_p90: Mapped[float | None] = mapped_column(Float)
    tpot_p99: Mapped[float | None] = mapped_column(Float)
    e2e_p50: Mapped[float | None] = mapped_column(Float)
    e2e_p90: Mapped[float | None] = mapped_column(Float)
    e2e_p99: Mapped[float | None] = mapped_column(Float)
    scheduling_delay_p99: Mapped[float | None] = mapped_column(Float)
    throughput_tokens_per_s: Mapped[float | None] = mapped_column(Float)
    throughput_requests_per_s: Mapped[float | None] = mapped_column(Float)
    mfu: Mapped[float | None] = mapped_column(Float)
    mbu: Mapped[float | None] = mapped_column(Float)
    kv_capacity_tokens: Mapped[int | None] = mapped_column(Integer)
    weights_gb_per_gpu: Mapped[float | None] = mapped_column(Float)
    slo_passed: Mapped[bool] = mapped_column(Boolean)
    # each SLO filter -> {"passed": bool, "value": float | None, ...}
    slo_detail: Mapped[dict[str, Any]] = mapped_column(JSONDocument)
    num_simulations: Mapped[int] = mapped_column(Integer)
    wall_time_s: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    def __repr__(self) -> str:
        return (
            f"CapacityResult(configuration_id={self.configuration_id!r}, "
            f"capacity_qps={self.capacity_qps!r}, qps_per_dollar={self.qps_per_dollar!r})"
        )


class ParetoPoint(Base):
    """One point of one Pareto frontier of a job; ``rank`` orders the points along it."""

    __tablename__ = "pareto_points"
    __table_args__ = (UniqueConstraint("job_id", "frontier", "rank"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    frontier: Mapped[str] = mapped_column(String(100))  # e.g. "qps_per_dollar-vs-ttft_p90"
    configuration_id: Mapped[int] = mapped_column(
        ForeignKey("configurations.id", ondelete="CASCADE"), index=True
    )
    rank: Mapped[int] = mapped_column(Integer)

    def __repr__(self) -> str:
        return (
            f"ParetoPoint(job_id={self.job_id!r}, frontier={self.frontier!r}, "
            f"rank={self.rank!r}, configuration_id={self.configuration_id!r})"
        )
