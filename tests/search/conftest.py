"""Shared fixtures of the search tests: one local Ray for the session, small specs."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from sqlalchemy import MetaData, create_engine

from search._db import ConfigRecord, ResultRecord, open_database
from search._db.store import fingerprint_of
from search._spec import parse_spec

PG_ENV = "LLMCAP_TEST_POSTGRES_URL"  # a PostgreSQL database the tests may wipe

# tests that need the optional aiconfigurator-core extra (measured points and tables)
needs_aic = pytest.mark.skipif(
    importlib.util.find_spec("aiconfigurator_core") is None,
    reason="the optional extra is not installed: pip install 'llmcap[aic]'",
)


@pytest.fixture(scope="session")
def ray_local() -> Iterator[object]:
    """One real local Ray (2 CPUs, no dashboard) shared by every test that needs it."""
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


TINY_SPEC = {
    "name": "tiny",
    "engine": "vidur",  # the driver tests pin behaviour of the pre-profile simulator
    "model": "meta-llama/Llama-2-7b-hf",
    "skus": ["a100-80gb", "h100-sxm"],
    "workload": {"source": "chat", "num_requests": 150},
    "budget": {"max_gpus": 2},
    "space": {
        "tp": [1, 2],
        "schedulers": {"sarathi": {"batch_size": [64], "chunk_size": [512]}, "vllm": {}},
    },
    "slo": {
        "filters": [
            {"metric": "ttft", "percentile": 90, "max_s": 2},
            {"metric": "tbt", "percentile": 99, "max_s": 0.2},
        ]
    },
    "capacity": {"tolerance": 0.15},
}


def write_spec(directory: Path, **overrides) -> Path:
    spec = {**TINY_SPEC, **overrides}
    path = directory / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture
def tiny_spec(tmp_path: Path) -> Path:
    return write_spec(tmp_path)


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'results.db'}"


def _wipe_postgres(url: str) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            metadata = MetaData()
            metadata.reflect(connection)
            metadata.drop_all(connection)
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def any_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty database: a SQLite file, or the wiped PostgreSQL test database
    (skipped unless LLMCAP_TEST_POSTGRES_URL names one: tests/search/postgres_server.sh)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'results.db'}"
        return
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(
            f"PostgreSQL variant: set {PG_ENV} to a database the tests may wipe "
            f"(tests/search/postgres_server.sh start prints one)"
        )
    _wipe_postgres(url)
    yield url
    _wipe_postgres(url)


def stored_config(i: int, label: str) -> ConfigRecord:
    """A configuration record as a search registers it (h100-sxm, one GPU, $2/h)."""
    params = {"sku": "h100-sxm", "scheduler": "sarathi", "tp": 1, "pp": 1, "batch_size": 64,
              "i": i, "label": label}  # fmt: skip
    return ConfigRecord(
        fingerprint=fingerprint_of(params), sku="h100-sxm", tp=1, pp=1, replicas=1,
        scheduler="sarathi", batch_size=64, chunk_size=512, precision="bf16", num_gpus=1,
        cost_per_hour=2.0, params=params, feasible=True, infeasible_reason=None,
    )  # fmt: skip


def stored_result(
    qps: float, kind: str, *, upper: float | None, rejected: int = 0
) -> ResultRecord:
    """A finished result passing the SLOs, at `qps` on `kind` capacity."""
    return ResultRecord(
        capacity_qps=qps, qps_per_dollar=qps / 2.0, num_simulations=5, wall_time_s=1.0,
        capacity_upper_qps=upper, tolerance=0.05, capacity_kind=kind, num_requests=4000,
        rejected_requests=rejected, slo_passed=True, ttft_p90=0.5, tbt_p99=0.05,
        cost_per_million_output_tokens=1.0,
    )  # fmt: skip


@pytest.fixture
def finished_job_db(tmp_path: Path) -> str:
    """A finished job: a measured configuration, and a better-looking one on the ceiling."""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    spec = parse_spec(TINY_SPEC)
    db = open_database(url)
    job = db.create_job("tiny", spec.model_dump_json(), spec.fingerprint())
    ids = db.register_configurations(
        job.id,
        spec.fingerprint(),
        [stored_config(1, "measured one"), stored_config(2, "ceiling one")],
    )
    db.record_result(ids[0], stored_result(10.0, "measured", upper=10.4, rejected=3))
    db.record_result(ids[1], stored_result(25.0, "ceiling", upper=None))
    db.finish_job(job.id, "succeeded")
    db.close()
    return url
