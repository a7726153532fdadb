"""The results database: schema creation and migration, the repository API, and the errors
a user sees.

Every test that takes ``db_url`` runs on a fresh SQLite file, and on PostgreSQL when
``LLMCAP_TEST_POSTGRES_URL`` names a database the tests may wipe (``tests/search/postgres_server.sh
start`` prints one).
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import shutil
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from datetime import UTC
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import IntegrityError

from search._db import (
    DEFAULT_URL,
    MIGRATIONS_DIR,
    Base,
    ConfigRecord,
    Database,
    DatabaseError,
    ResultRecord,
    ensure_schema,
    fingerprint_of,
    head_revision,
    open_database,
    resolve_url,
)
from search._db.connect import make_engine, parse_url

SPEC_A = fingerprint_of({"spec": "a"})
SPEC_B = fingerprint_of({"spec": "b"})
OUR_TABLES = {
    "jobs",
    "configurations",
    "job_configurations",
    "capacity_results",
    "pareto_points",
    "alembic_version",
}


# ---------------------------------------------------------------- fixtures


@pytest.fixture
def db_url(any_db_url: str) -> str:
    """A URL of an empty database: a SQLite file, or the wiped PostgreSQL test database."""
    return any_db_url


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    database = open_database(db_url)
    yield database
    database.close()


def config(
    i: int,
    *,
    sku: str = "a100-80gb",
    scheduler: str = "vllm",
    feasible: bool = True,
    tp: int = 1,
) -> ConfigRecord:
    params = {"sku": sku, "scheduler": scheduler, "tp": tp, "pp": 1, "batch_size": 8 * (i + 1)}
    return ConfigRecord(
        fingerprint=fingerprint_of(params | {"i": i}),
        sku=sku,
        tp=tp,
        pp=1,
        replicas=1,
        scheduler=scheduler,
        batch_size=8 * (i + 1),
        chunk_size=512 if scheduler == "sarathi" else None,
        precision="fp16",
        num_gpus=tp,
        cost_per_hour=2.5 * tp,
        params=params,
        feasible=feasible,
        infeasible_reason=None if feasible else "weights do not fit",
    )


def result(qps: float, *, slo_passed: bool = True, **metrics: Any) -> ResultRecord:
    return ResultRecord(
        capacity_qps=qps,
        qps_per_dollar=qps / 2.5,
        num_simulations=7,
        wall_time_s=1.5,
        slo_passed=slo_passed,
        slo_detail={"ttft_p90": {"passed": slo_passed, "value": 0.4}},
        ttft_p90=0.4,
        tbt_p99=0.05,
        **metrics,
    )


def snapshot(url: str) -> Any:
    """What must stay unchanged when a database is refused: the bytes of a SQLite file, the
    tables and rows of a PostgreSQL database."""
    if url.startswith("sqlite"):
        return Path(parse_url(url).database or "").read_bytes()
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            tables = sorted(inspect(connection).get_table_names())
            return {
                table: sorted(map(tuple, connection.execute(text(f'SELECT * FROM "{table}"'))))
                for table in tables
            }
    finally:
        engine.dispose()


def raw_execute(url: str, *statements: str) -> None:
    """Run SQL outside llmcap (as another program, or an older/newer llmcap, would)."""
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            for statement in statements:
                connection.execute(text(statement))
    finally:
        engine.dispose()


# ------------------------------------------------------- schema and migrations


def test_fresh_database_is_created_at_head(db_url: str) -> None:
    with open_database(db_url) as db:
        assert db.revision() == head_revision()
        with db.engine.connect() as connection:
            assert set(inspect(connection).get_table_names()) >= OUR_TABLES
            if connection.dialect.name == "sqlite":
                assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
                assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
                assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000
        job = db.create_job("first", "{}", SPEC_A)
    # opening again changes nothing and keeps the data
    with open_database(db_url) as db:
        assert db.revision() == head_revision()
        assert [j.id for j in db.list_jobs()] == [job.id]
        with db.engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1


def _open_and_close(url: str) -> str | None:
    with open_database(url) as db:
        return db.revision()


@pytest.mark.parametrize("workers", ["threads", "processes"])
def test_concurrent_first_opens_create_the_schema_once(db_url: str, workers: str) -> None:
    if workers == "threads":
        start = threading.Barrier(4)

        def opened(url: str) -> str | None:
            start.wait()
            return _open_and_close(url)

        with ThreadPoolExecutor(max_workers=4) as threads:
            revisions = list(threads.map(opened, [db_url] * 4))
    else:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=4, mp_context=context) as processes:
            revisions = list(processes.map(_open_and_close, [db_url] * 4))
    assert revisions == [head_revision()] * 4
    with open_database(db_url) as db, db.engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1


def test_migrations_match_the_models(db: Database) -> None:
    with db.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []


def test_foreign_keys_are_enforced(db_url: str) -> None:
    open_database(db_url).close()
    # a row pointing at no job cannot be written (SQLite needs PRAGMA foreign_keys on)
    with pytest.raises(IntegrityError, match=r"(?i)foreign key"):
        raw_engine = make_engine(parse_url(db_url))
        try:
            with raw_engine.begin() as connection:
                connection.execute(
                    text(
                        "INSERT INTO pareto_points (job_id, frontier, configuration_id, rank) "
                        "VALUES (12345, 'f', 12345, 0)"
                    )
                )
        finally:
            raw_engine.dispose()


def test_default_url_environment_and_argument(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # no alembic.ini in the working directory: the migrations are found inside the package
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LLMCAP_DB", raising=False)
    assert resolve_url() == DEFAULT_URL == "sqlite:///results.db"
    with open_database() as db:
        db.create_job("default", "{}", SPEC_A)
    assert (tmp_path / "results.db").exists()

    monkeypatch.setenv("LLMCAP_DB", f"sqlite:///{tmp_path / 'from_env.db'}")
    with open_database() as db:
        assert db.latest_job() is None
        db.create_job("env", "{}", SPEC_A)
    assert (tmp_path / "from_env.db").exists()

    # an argument beats the environment; a bare path means a SQLite file
    with open_database("explicit.db") as db:
        assert db.latest_job() is None
    assert (tmp_path / "explicit.db").exists()


def test_unknown_revision_is_refused_and_left_unchanged(db_url: str) -> None:
    with open_database(db_url) as db:
        db.create_job("old", "{}", SPEC_A)
    raw_execute(db_url, "UPDATE alembic_version SET version_num = '9999_from_the_future'")
    before = snapshot(db_url)

    with pytest.raises(DatabaseError) as caught:
        open_database(db_url)
    message = str(caught.value)
    assert "9999_from_the_future" in message
    assert head_revision() in message
    assert "Upgrade llmcap" in message and "--db" in message
    assert snapshot(db_url) == before


def test_tables_without_a_revision_are_refused(db_url: str) -> None:
    raw_execute(db_url, "CREATE TABLE other_app (id INTEGER PRIMARY KEY, name TEXT)")
    raw_execute(db_url, "INSERT INTO other_app (id, name) VALUES (1, 'theirs')")
    before = snapshot(db_url)
    with pytest.raises(DatabaseError, match="other_app") as caught:
        open_database(db_url)
    assert "not an llmcap results database" in str(caught.value)
    assert "--db" in str(caught.value)
    assert snapshot(db_url) == before


def test_stamped_base_without_tables_is_upgraded(db_url: str) -> None:
    # `alembic stamp base` leaves an empty alembic_version table and nothing else
    raw_execute(
        db_url,
        "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)",
    )
    with open_database(db_url) as db:
        assert db.revision() == head_revision()
        job = db.create_job("j", "{}", SPEC_A)
        assert db.get_job().id == job.id


NEXT = "9000"  # a revision after this code's head, as a newer llmcap would ship


def _migrations_with(tmp_path: Path, body: str) -> Path:
    """A copy of the package's migrations plus a revision `NEXT` after the head doing ``body``."""
    location = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS_DIR, location, ignore=shutil.ignore_patterns("__pycache__"))
    (location / "versions" / "9000_next.py").write_text(
        "from __future__ import annotations\n\n"
        "import sqlalchemy as sa\n"
        "from alembic import op\n\n"
        f"revision = {NEXT!r}\n"
        f"down_revision = {head_revision()!r}\n"
        "branch_labels = None\n"
        "depends_on = None\n\n\n"
        "def upgrade() -> None:\n"
        f"{body}\n\n\n"
        "def downgrade() -> None:\n"
        '    op.drop_column("jobs", "note")\n'
    )
    return location


def test_older_revision_is_upgraded_and_then_refused_by_older_code(
    db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with open_database(db_url) as db:
        db.create_job("kept", "{}", SPEC_A)
        assert db.revision() == head_revision()
    location = _migrations_with(tmp_path, '    op.add_column("jobs", sa.Column("note", sa.Text()))')

    engine = make_engine(parse_url(db_url))
    try:
        with caplog.at_level(logging.INFO, logger="search._db.schema"):
            assert ensure_schema(engine, script_location=location) == NEXT
        assert f"from schema revision {head_revision()} to {NEXT}" in caplog.text
        with engine.connect() as connection:
            columns = {c["name"] for c in inspect(connection).get_columns("jobs")}
            assert "note" in columns
            assert connection.execute(text("SELECT name FROM jobs")).scalar() == "kept"
        # at head now: a second run does nothing
        assert ensure_schema(engine, script_location=location) == NEXT
    finally:
        engine.dispose()

    # the code without revision NEXT does not know this database: refused, untouched
    before = snapshot(db_url)
    with pytest.raises(DatabaseError, match=NEXT):
        open_database(db_url)
    assert snapshot(db_url) == before


def test_a_database_of_the_first_release_is_upgraded_keeping_its_data(
    db_url: str, tmp_path: Path
) -> None:
    first = tmp_path / "first"
    shutil.copytree(MIGRATIONS_DIR, first, ignore=shutil.ignore_patterns("__pycache__"))
    for later in (first / "versions").glob("0*.py"):
        if not later.name.startswith("0001_"):
            later.unlink()
    engine = make_engine(parse_url(db_url))
    try:
        assert ensure_schema(engine, script_location=first) == "0001"
    finally:
        engine.dispose()
    with open_database(db_url) as db:  # the package's migrations: 0001 -> head
        assert db.revision() == head_revision() != "0001"
        with db.engine.connect() as connection:
            columns = {c["name"] for c in inspect(connection).get_columns("capacity_results")}
        assert {"capacity_upper_qps", "tolerance"} <= columns
        job = db.create_job("after upgrade", "{}", SPEC_A)
        assert db.get_job().id == job.id


def test_failed_migration_is_rolled_back(db_url: str, tmp_path: Path) -> None:
    with open_database(db_url) as db:
        db.create_job("kept", "{}", SPEC_A)
    location = _migrations_with(
        tmp_path,
        '    op.add_column("jobs", sa.Column("note", sa.Text()))\n'
        '    op.execute("SELECT no_such_column FROM no_such_table")',
    )
    engine = make_engine(parse_url(db_url))
    try:
        with pytest.raises(DatabaseError, match="rolled back"):
            ensure_schema(engine, script_location=location)
        with engine.connect() as connection:
            columns = {c["name"] for c in inspect(connection).get_columns("jobs")}
            assert "note" not in columns
            assert connection.execute(text("SELECT version_num FROM alembic_version")).all() == [
                (head_revision(),)
            ]
    finally:
        engine.dispose()
    with open_database(db_url) as db:
        assert db.get_job().name == "kept"


# ----------------------------------------------------------- connection errors


def test_unreachable_postgres_names_the_url_with_the_password_masked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = "postgresql+psycopg://u:s3cret-pw@127.0.0.1:1/db"
    with pytest.raises(DatabaseError) as caught:
        open_database(url)
    message = str(caught.value)
    assert "postgresql+psycopg://u:***@127.0.0.1:1/db" in message
    assert "s3cret-pw" not in message
    assert "running" in message and "127.0.0.1:1" in message
    assert "postgresql+psycopg://user:password@host:5432/dbname" in message
    # the same through the environment variable, and with a bare postgresql:// URL
    monkeypatch.setenv("LLMCAP_DB", "postgresql://u:s3cret-pw@127.0.0.1:1/db")
    with pytest.raises(DatabaseError, match=r"u:\*\*\*@127\.0\.0\.1:1/db") as caught:
        open_database()
    assert "s3cret-pw" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("nosuchdb+driver://u:pw@host/db", "unknown database kind"),
        ("postgresql+asyncpg://u:pw@host/db", "psycopg"),
        ("postgresql//u:pw@host/db", "cannot parse"),
    ],
)
def test_bad_urls_say_what_to_do(url: str, expected: str) -> None:
    with pytest.raises(DatabaseError, match=expected) as caught:
        open_database(url)
    assert "pw" not in str(caught.value).replace("password", "")
    assert "--db" in str(caught.value) or "postgresql+psycopg://" in str(caught.value)


def test_sqlite_in_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(DatabaseError, match="does not exist"):
        open_database(f"sqlite:///{tmp_path / 'nowhere' / 'results.db'}")
    assert not (tmp_path / "nowhere").exists()


def test_a_file_that_is_not_a_database_is_refused_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database\n" * 100)
    before = path.read_bytes()
    with pytest.raises(DatabaseError, match="not a SQLite database"):
        open_database(f"sqlite:///{path}")
    assert path.read_bytes() == before


# ------------------------------------------------------------------------ jobs


def test_jobs_latest_timings_and_resume(db: Database) -> None:
    assert db.latest_job() is None
    assert db.list_jobs() == []
    first = db.create_job("first", '{"a": 1}', SPEC_A)
    second = db.create_job("second", '{"b": 2}', SPEC_B, ray_job_id="raysubmit_1")
    assert first.status == "pending" and first.llmcap_version
    assert second.ray_job_id == "raysubmit_1"
    assert db.latest_job().id == second.id  # type: ignore[union-attr]
    assert db.latest_job(SPEC_A).id == first.id  # type: ignore[union-attr]
    assert db.get_job(None).id == second.id
    assert [job.id for job in db.list_jobs()] == [second.id, first.id]
    assert [job.id for job in db.list_jobs(limit=1)] == [second.id]

    started = db.start_job(first.id)
    assert started.status == "running"
    assert started.started_at is not None and started.started_at.tzinfo is not None
    assert started.started_at.utcoffset() == UTC.utcoffset(None)
    failed = db.finish_job(first.id, "failed", error="driver lost its cluster")
    assert failed.finished_at is not None and failed.finished_at >= started.started_at
    assert db.get_job(first.id).error == "driver lost its cluster"

    # resumed: running again, first start time kept, finish and error cleared
    resumed = db.start_job(first.id)
    assert resumed.started_at == started.started_at
    assert resumed.finished_at is None and resumed.error is None
    assert db.finish_job(first.id, "succeeded").status == "succeeded"
    with pytest.raises(ValueError, match="finish status"):
        db.finish_job(first.id, "running")
    reread = db.get_job(first.id)
    assert reread.created_at.tzinfo is not None
    assert reread.spec == '{"a": 1}' and reread.spec_fingerprint == SPEC_A


def test_unknown_job_id_lists_recent_jobs(db: Database) -> None:
    with pytest.raises(DatabaseError, match="holds no jobs yet"):
        db.get_job()
    with pytest.raises(DatabaseError, match="no job 3"):
        db.get_job(3)
    ids = [db.create_job(f"job-{i}", "{}", SPEC_A).id for i in range(7)]
    with pytest.raises(DatabaseError) as caught:
        db.get_job(999)
    message = str(caught.value)
    assert "no job 999" in message
    for job_id in ids[-5:]:
        assert f"{job_id} (job-" in message
    assert f"{ids[0]} (job-0" not in message  # only the most recent few
    assert f"latest one ({ids[-1]})" in message
    assert "***" in message or "sqlite" in message  # names the database
    with pytest.raises(DatabaseError, match="no job 99999999999"):
        db.get_job(99_999_999_999)  # beyond PostgreSQL's integer


# -------------------------------------------------------------- configurations


def test_registration_is_idempotent_across_jobs_of_one_spec(db: Database) -> None:
    configs = [config(0), config(1), config(2, feasible=False), config(3)]
    first = db.create_job("first", "{}", SPEC_A)
    ids = db.register_configurations(first.id, SPEC_A, configs)
    assert len(set(ids)) == 4
    assert db.register_configurations(first.id, SPEC_A, configs) == ids  # same job, again
    assert [c.id for c in db.pending_configurations(SPEC_A)] == [ids[0], ids[1], ids[3]]
    assert db.configuration_counts(first.id) == {
        "pending": 3,
        "done": 0,
        "failed": 0,
        "infeasible": 1,
    }

    # the first driver finishes two configurations, then is killed
    db.record_result(ids[0], result(10.0))
    db.record_result(ids[3], result(4.0))

    # a new job of the same spec: same rows, in any order, duplicates collapse
    second = db.create_job("second", "{}", SPEC_A)
    again = db.register_configurations(second.id, SPEC_A, [configs[3], configs[1], configs[0]])
    assert again == [ids[3], ids[1], ids[0]]
    assert db.register_configurations(second.id, SPEC_A, configs + configs) == ids + ids
    pending = db.pending_configurations(SPEC_A)
    assert [c.id for c in pending] == [ids[1]]
    assert pending[0].record == configs[1]
    assert pending[0].job_id == first.id  # registered by the first job

    frame = db.results(second.id)
    assert len(frame) == 4 and frame["configuration_id"].is_unique
    assert set(frame.loc[frame["status"] == "done", "configuration_id"]) == {ids[0], ids[3]}
    assert db.configuration_counts(second.id)["done"] == 2

    # another spec with the same configurations has rows of its own
    other = db.create_job("other spec", "{}", SPEC_B)
    other_ids = db.register_configurations(other.id, SPEC_B, configs[:2])
    assert not set(other_ids) & set(ids)
    assert [c.id for c in db.pending_configurations(SPEC_B)] == other_ids


def test_register_checks_the_job(db: Database) -> None:
    with pytest.raises(DatabaseError, match="no job 42"):
        db.register_configurations(42, SPEC_A, [config(0)])


def test_record_result_twice_keeps_one_row(db: Database) -> None:
    job = db.create_job("j", "{}", SPEC_A)
    (cid,) = db.register_configurations(job.id, SPEC_A, [config(0)])
    db.record_result(cid, result(5.0))
    db.record_result(cid, result(6.0, mfu=0.4))
    frame = db.results(job.id)
    assert len(frame) == 1
    row = frame.iloc[0]
    assert row["capacity_qps"] == 6.0 and row["mfu"] == pytest.approx(0.4)
    assert row["status"] == "done" and row["attempts"] == 1
    with db.engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM capacity_results")).scalar() == 1
    assert db.pending_configurations(SPEC_A) == []


def test_failure_then_retry_accounting(db: Database) -> None:
    job = db.create_job("j", "{}", SPEC_A)
    flaky, broken = db.register_configurations(job.id, SPEC_A, [config(0), config(1)])

    assert db.record_failure(flaky, "worker died") == 1
    assert db.record_failure(broken, "ValueError: bad shape") == 1
    pending = {c.id: c for c in db.pending_configurations(SPEC_A)}
    assert set(pending) == {flaky, broken}  # retried once
    assert pending[broken].status == "failed" and pending[broken].attempts == 1
    assert pending[broken].error == "ValueError: bad shape"

    db.record_result(flaky, result(3.0))
    assert db.record_failure(broken, "ValueError: bad shape again") == 2
    assert db.pending_configurations(SPEC_A) == []  # no third attempt
    assert [c.id for c in db.pending_configurations(SPEC_A, max_attempts=3)] == [broken]

    done = db.get_configuration(flaky)
    assert (done.status, done.attempts, done.error) == ("done", 2, None)
    failed = db.get_configuration(broken)
    assert (failed.status, failed.attempts) == ("failed", 2)
    assert failed.error == "ValueError: bad shape again"
    # a late failure of a duplicate task does not undo a result
    assert db.record_failure(flaky, "late") == 2
    assert db.get_configuration(flaky).status == "done"
    assert db.configuration_counts(job.id) == {
        "pending": 0,
        "done": 1,
        "failed": 1,
        "infeasible": 0,
    }
    with pytest.raises(ValueError, match="no configuration"):
        db.record_failure(10_000, "x")


def test_reset_failed(db: Database) -> None:
    job = db.create_job("j", "{}", SPEC_A)
    broken, fine = db.register_configurations(job.id, SPEC_A, [config(0), config(1)])
    for _ in range(2):
        db.record_failure(broken, "bug")
    db.record_result(fine, result(1.0))
    assert db.pending_configurations(SPEC_A) == []
    assert db.reset_failed(SPEC_A) == 1
    (again,) = db.pending_configurations(SPEC_A)
    assert (again.id, again.status, again.attempts, again.error) == (broken, "pending", 0, None)
    assert db.get_configuration(fine).status == "done"


def test_mark_infeasible(db: Database) -> None:
    job = db.create_job("j", "{}", SPEC_A)
    (cid,) = db.register_configurations(job.id, SPEC_A, [config(0)])
    db.mark_infeasible(cid, "KV cache does not fit one request")
    stored = db.get_configuration(cid)
    assert stored.status == "infeasible" and not stored.record.feasible
    assert stored.record.infeasible_reason == "KV cache does not fit one request"
    assert db.pending_configurations(SPEC_A) == []


# -------------------------------------------------------------------- results


def test_results_dataframe_and_filters(db: Database) -> None:
    job = db.create_job("j", "{}", SPEC_A)
    configs = [
        config(0, sku="a100-80gb", scheduler="vllm"),
        config(1, sku="a100-80gb", scheduler="sarathi"),
        config(2, sku="h100-80gb", scheduler="sarathi", tp=2),
        config(3, sku="h100-80gb", scheduler="vllm", feasible=False),
        config(4, sku="h100-80gb", scheduler="orca"),  # stays pending
    ]
    ids = db.register_configurations(job.id, SPEC_A, configs)
    db.record_result(ids[0], result(5.0, slo_passed=True))
    db.record_result(ids[1], result(9.0, slo_passed=False))
    db.record_result(
        ids[2],
        result(
            np.float64(12.0),
            slo_passed=np.bool_(True),
            mfu=np.float32(0.5),
            kv_capacity_tokens=np.int64(123_456),
            tpot_p99=float("nan"),
        ),
    )

    frame = db.results()  # the latest job
    assert list(frame["configuration_id"]) == [ids[2], ids[1], ids[0], ids[3], ids[4]]
    for column in ("sku", "tp", "scheduler", "chunk_size", "num_gpus", "cost_per_hour", "params",
                   "status", "feasible", "capacity_qps", "qps_per_dollar", "ttft_p90", "tbt_p99",
                   "mfu", "slo_passed", "slo_detail", "num_simulations", "wall_time_s",
                   "result_created_at"):  # fmt: skip
        assert column in frame.columns, column
    best = frame.iloc[0]
    assert best["capacity_qps"] == 12.0 and best["kv_capacity_tokens"] == 123_456
    assert best["mfu"] == pytest.approx(0.5)
    assert best["tpot_p99"] is None or math.isnan(best["tpot_p99"])
    assert best["params"] == configs[2].params
    assert best["slo_detail"] == {"ttft_p90": {"passed": True, "value": 0.4}}
    assert pd.isna(frame.iloc[-1]["capacity_qps"])  # pending: no result yet

    assert set(db.results(job.id, sku="h100-80gb")["configuration_id"]) == set(ids[2:])
    assert set(db.results(job.id, sku=["a100-80gb"], scheduler="sarathi")["configuration_id"]) == {
        ids[1]
    }
    assert list(db.results(job.id, slo_passed=True)["configuration_id"]) == [ids[2], ids[0]]
    assert list(db.results(job.id, slo_passed=False)["configuration_id"]) == [ids[1]]
    assert list(db.results(job.id, feasible=False)["configuration_id"]) == [ids[3]]
    assert len(db.results(job.id, feasible=True)) == 4
    assert list(db.results(job.id, status="pending")["configuration_id"]) == [ids[4]]
    # another job of the same spec with a smaller space sees only its own configurations
    narrow = db.create_job("narrow", "{}", SPEC_A)
    assert db.register_configurations(narrow.id, SPEC_A, configs[:2]) == ids[:2]
    assert list(db.results(narrow.id)["configuration_id"]) == [ids[1], ids[0]]
    assert db.configuration_counts(narrow.id) == {
        "pending": 0,
        "done": 2,
        "failed": 0,
        "infeasible": 0,
    }
    empty = db.results(db.create_job("none", "{}", SPEC_B).id)
    assert empty.empty and "qps_per_dollar" in empty.columns


def test_result_requires_the_capacity(db: Database) -> None:
    job = db.create_job("j", "{}", SPEC_A)
    (cid,) = db.register_configurations(job.id, SPEC_A, [config(0)])
    with pytest.raises(ValueError, match="capacity_qps"):
        db.record_result(cid, result(float("nan")))
    assert db.get_configuration(cid).status == "pending"


# --------------------------------------------------------------------- pareto


def test_replace_pareto(db: Database) -> None:
    job = db.create_job("j", "{}", SPEC_A)
    ids = db.register_configurations(job.id, SPEC_A, [config(i) for i in range(4)])
    for i, cid in enumerate(ids):
        db.record_result(cid, result(1.0 + i))
    ttft = "qps_per_dollar-vs-ttft_p90"
    tbt = "qps_per_dollar-vs-tbt_p99"
    db.replace_pareto(job.id, ttft, [ids[3], ids[1], ids[2]])
    db.replace_pareto(job.id, tbt, [ids[0]])
    db.replace_pareto(job.id, ttft, [ids[2], ids[3]])  # replaces, not appends

    points = db.pareto_points(job.id)
    along = zip(points["frontier"], points["rank"], points["configuration_id"], strict=True)
    assert list(along) == [
        (tbt, 0, ids[0]),
        (ttft, 0, ids[2]),
        (ttft, 1, ids[3]),
    ]
    assert points.iloc[1]["capacity_qps"] == 3.0  # joined with the result
    assert list(db.pareto_points(frontier=ttft)["configuration_id"]) == [ids[2], ids[3]]

    other = db.create_job("other", "{}", SPEC_A)
    db.replace_pareto(other.id, ttft, [ids[0]])
    assert len(db.pareto_points(job.id)) == 3  # jobs are separate
    db.replace_pareto(other.id, ttft, [])
    assert db.pareto_points(other.id).empty

    with pytest.raises(ValueError, match="twice"):
        db.replace_pareto(job.id, ttft, [ids[0], ids[0]])
    with pytest.raises(ValueError, match="no configurations"):
        db.replace_pareto(job.id, ttft, [ids[0], 99_999])
    assert len(db.pareto_points(job.id)) == 3  # a refused replacement changed nothing


def test_fingerprint_is_canonical() -> None:
    a = fingerprint_of({"tp": 2, "sku": "h100", "nested": {"x": (1, 2), "y": np.int64(3)}})
    b = fingerprint_of({"nested": {"y": 3, "x": [1, 2]}, "sku": "h100", "tp": 2})
    assert a == b and len(a) == 64
    assert fingerprint_of({"tp": 2}) != fingerprint_of({"tp": 4})
