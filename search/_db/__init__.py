"""The results database: jobs, configurations, capacity results and Pareto points.

SQLAlchemy 2 typed models with Alembic migrations; SQLite (``sqlite:///results.db``, WAL) by
default, PostgreSQL by URL (``--db`` or ``LLMCAP_DB``). ``open_database`` creates or upgrades the
schema, or refuses a database it does not know with a ``DatabaseError`` meant for the user.
Only the search driver writes.

    db = open_database()                      # $LLMCAP_DB or sqlite:///results.db
    job = db.create_job(name, spec_json, spec_fp)
    ids = db.register_configurations(job.id, spec_fp, records)
    for pending in db.pending_configurations(spec_fp): ...
    db.record_result(configuration_id, ResultRecord(...))
"""

from __future__ import annotations

from search._db.connect import DEFAULT_URL, ENV_VAR, mask_url, resolve_url
from search._db.errors import DatabaseError
from search._db.models import (
    CAPACITY_KINDS,
    CONFIGURATION_STATUSES,
    JOB_STATUSES,
    Base,
    CapacityResult,
    Configuration,
    Job,
    JobConfiguration,
    ParetoPoint,
    PlanRun,
)
from search._db.schema import MIGRATIONS_DIR, ensure_schema, head_revision
from search._db.store import (
    MAX_ATTEMPTS,
    ConfigRecord,
    Database,
    ResultRecord,
    StoredConfiguration,
    fingerprint_of,
    open_database,
)

__all__ = [
    "CAPACITY_KINDS",
    "CONFIGURATION_STATUSES",
    "DEFAULT_URL",
    "ENV_VAR",
    "JOB_STATUSES",
    "MAX_ATTEMPTS",
    "MIGRATIONS_DIR",
    "Base",
    "CapacityResult",
    "ConfigRecord",
    "Configuration",
    "Database",
    "DatabaseError",
    "Job",
    "JobConfiguration",
    "ParetoPoint",
    "PlanRun",
    "ResultRecord",
    "StoredConfiguration",
    "ensure_schema",
    "fingerprint_of",
    "head_revision",
    "mask_url",
    "open_database",
    "resolve_url",
]
