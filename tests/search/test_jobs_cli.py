"""The job system as a user drives it: Ray Jobs submission, kill and resume, queries."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from search._db import DatabaseError, open_database
from tests.search.conftest import TINY_SPEC, write_spec

BIN = Path(sys.executable).parent
LLMCAP = str(BIN / "llmcap")


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # loopback only
        "RAY_USAGE_STATS_ENABLED": "0",
        "COLUMNS": "200",
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def llmcap(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [LLMCAP, *args], env=_env(), capture_output=True, text=True, timeout=timeout
    )


@contextmanager
def running_ray_head(env: dict[str, str], temp_dir: Path | None = None) -> Iterator[str]:
    """`ray start --head --block` on loopback, yielding its dashboard URL; stopped by
    signalling only its own processes.

    (Loopback comes from RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0; `--node-ip-address 127.0.0.1`
    leaves the job agent unregistered in Ray 2.60.)
    """
    dashboard = _free_port()
    temp = [f"--temp-dir={temp_dir}"] if temp_dir is not None else []
    head = subprocess.Popen(
        [str(BIN / "ray"), "start", "--head", "--block", f"--port={_free_port()}", *temp,
         "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}",
         # its own agent ports: the session's local Ray may hold the default ones
         f"--dashboard-agent-listen-port={_free_port()}",
         f"--dashboard-agent-grpc-port={_free_port()}",
         f"--runtime-env-agent-port={_free_port()}", f"--metrics-export-port={_free_port()}",
         f"--ray-client-server-port={_free_port()}",
         "--num-cpus=1", "--include-dashboard=true", "--disable-usage-stats"],
        env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{dashboard}"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/version", timeout=2)
            break
        except urllib.error.HTTPError:  # it answers (401 without a token): it is up
            break
        except OSError:
            if head.poll() is not None or time.monotonic() > deadline:
                pytest.fail("ray start --head did not come up")
            time.sleep(1)
    try:
        yield url
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(timeout=30)


@pytest.fixture(scope="module")
def ray_head():
    with running_ray_head(_env()) as url:
        yield url


def test_submit_to_a_ray_cluster_and_follow_the_job(tmp_path, ray_head):
    spec = write_spec(tmp_path, skus=["a100-80gb"], space={"tp": [1], "schedulers": {"vllm": {}}})
    db_url = f"sqlite:///{tmp_path / 'jobs.db'}"
    submitted = llmcap("search", "submit", str(spec), "--address", ray_head, "--db", db_url)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().splitlines()[-1]
    deadline = time.monotonic() + 240
    while True:
        status = llmcap("search", "status", job_id, "--address", ray_head).stdout.strip()
        if status in ("SUCCEEDED", "FAILED", "STOPPED") or time.monotonic() > deadline:
            break
        time.sleep(2)
    logs = llmcap("search", "logs", job_id, "--address", ray_head).stdout
    assert status == "SUCCEEDED", logs
    assert "succeeded: 1 evaluated" in logs
    db = open_database(db_url)
    assert db.latest_job().status == "succeeded"
    assert len(db.results(status="done")) == 1
    stopped = llmcap("search", "cancel", job_id, "--address", ray_head)
    assert stopped.returncode == 0 and "not running" in stopped.stdout


def test_unreachable_ray_address_says_how_to_fix_it(tmp_path):
    port = _free_port()  # nothing listens there
    result = llmcap("search", "status", "raysubmit_x", "--address", f"http://127.0.0.1:{port}")
    assert result.returncode == 2
    assert "cannot reach the Ray Jobs API" in result.stderr and "Traceback" not in result.stderr


def _done(db_url: str) -> int:
    """Configurations the latest job has done (0 before it has registered any)."""
    try:
        return open_database(db_url).configuration_counts()["done"]
    except DatabaseError:
        return 0


def test_a_killed_driver_loses_nothing_and_a_rerun_finishes_the_job(tmp_path):
    spec_path = write_spec(tmp_path, workload={"source": "chat", "num_requests": 400})
    db_url = f"sqlite:///{tmp_path / 'resume.db'}"
    driver = subprocess.Popen(
        [LLMCAP, "search", "run", str(spec_path), "--db", db_url, "--executor", "local",
         "--workers", "1"],
        env=_env(), start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and driver.poll() is None:
        if (tmp_path / "resume.db").exists() and _done(db_url) >= 2:
            break
        time.sleep(0.2)
    os.killpg(driver.pid, signal.SIGKILL)  # the driver and its workers, mid-job
    driver.wait(timeout=30)
    db = open_database(db_url)
    before = db.results(status="done").set_index("fingerprint")["capacity_qps"]
    assert 2 <= len(before) < 8, "the job should have been killed half-way"
    assert db.latest_job().status == "running"  # killed: never finished

    rerun = llmcap("search", "run", str(spec_path), "--db", db_url, "--executor", "local")
    assert rerun.returncode == 0, rerun.stderr
    assert f"{len(before)} reused" in rerun.stdout
    after = open_database(db_url).results(status="done").set_index("fingerprint")
    assert len(after) == 8  # every configuration exactly once
    kept = after.loc[before.index]
    # finished results kept: as they were, or refined within their bracket (only up)
    coarse = kept["tolerance"] == TINY_SPEC["capacity"]["tolerance"]
    assert kept.loc[coarse, "capacity_qps"].equals(before[coarse])
    assert (kept.loc[~coarse, "capacity_qps"] >= before[~coarse]).all()


def test_results_commands_on_a_finished_job(tmp_path):
    # no lengthening: 150 requests cannot load H100 TP2 with vLLM
    spec_path = write_spec(tmp_path, capacity={"tolerance": 0.15, "max_requests": 150})
    db_url = f"sqlite:///{tmp_path / 'q.db'}"
    ran = llmcap("search", "run", str(spec_path), "--db", db_url, "--executor", "inline")
    assert ran.returncode == 0, ran.stderr
    # the run says which capacities rest on the ceiling
    assert "rests on that ceiling, not a measurement" in " ".join(ran.stdout.split())
    listing = llmcap("results", "list", "--db", db_url, "--sku", "h100-sxm")
    assert listing.returncode == 0 and "h100-sxm" in listing.stdout and "a100" not in listing.stdout
    assert "ceiling 150" in listing.stdout and "measured 150" in listing.stdout
    best = llmcap("results", "best", "--db", db_url)
    # 0 with a recommendation, 1 (documented, for cron) when nothing qualifies
    recommended = "Recommended" in best.stdout
    assert (best.returncode, recommended) in ((0, True), (1, False)), best.stdout
    assert recommended or "no configuration" in best.stdout
    out = tmp_path / "all.json"
    exported = llmcap("results", "export", "1", "--db", db_url, "--out", str(out))
    assert exported.returncode == 0
    rows = json.loads(out.read_text())
    assert len(rows) == 8
    assert {row["capacity_kind"] for row in rows} == {"measured", "ceiling"}
    assert all(row["num_requests"] == 150 and row["rejected_requests"] >= 0 for row in rows)
    plot = llmcap("pareto", "plot", "--db", db_url, "--out", str(tmp_path / "p.svg"))
    assert plot.returncode == 0 and (tmp_path / "p.svg").read_text().lstrip().startswith("<")
    jobs = llmcap("jobs", "list", "--db", db_url)
    assert jobs.returncode == 0 and "tiny" in jobs.stdout
    missing = llmcap("results", "show", "99", "--db", db_url)
    assert missing.returncode == 2 and "99" in missing.stderr
