"""Several drivers on one database, and drivers that stop: work shared, nothing lost or doubled.

Real `llmcap search run` processes on SQLite and (with LLMCAP_TEST_POSTGRES_URL) PostgreSQL.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from search._db import DatabaseError, open_database
from search._driver import SearchDriver
from search._spec import load_spec
from tests.search.conftest import TINY_SPEC, write_spec

BIN = Path(sys.executable).parent
LLMCAP = str(BIN / "llmcap")
LEASE_S = "3"  # short, so a killed driver's job shows as interrupted within the test


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
        "LLMCAP_LEASE_S": LEASE_S,
        "COLUMNS": "200",
    }


def _driver(spec: Path, db_url: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [LLMCAP, "search", "run", str(spec), "--db", db_url, "--executor", "local",
         "--workers", "1", *extra],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip


def _finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=300)
    return process.returncode, out, err


def _count(pattern: str, text: str) -> int:
    found = re.search(pattern, text)
    assert found, f"{pattern!r} not in:\n{text}"
    return int(found.group(1))


def _spec_dir(tmp_path: Path, name: str, **overrides) -> Path:
    directory = tmp_path / name
    directory.mkdir()
    return write_spec(directory, **overrides)


def test_two_drivers_of_one_spec_share_the_work(tmp_path, any_db_url):
    spec = _spec_dir(tmp_path, "a")
    first, second = _driver(spec, any_db_url), _driver(spec, any_db_url)
    outputs = [_finish(first), _finish(second)]
    for code, _out, err in outputs:
        assert code == 0, err
        assert "Traceback" not in err
    evaluated = sum(_count(r"(\d+) evaluated", out) for _, out, _ in outputs)
    refined = sum(_count(r"(\d+) refined", out) for _, out, _ in outputs)
    db = open_database(any_db_url)
    jobs = db.list_jobs()
    assert len(jobs) == 2 and {job.status for job in jobs} == {"succeeded"}
    for job in jobs:
        frame = db.results(job.id, status="done")
        assert len(frame) == 8  # both jobs answer for every configuration
    frame = db.results(jobs[0].id, status="done")
    # each configuration simulated once, by one driver or the other; each refinement once
    assert evaluated == 8
    fine = frame["tolerance"] < TINY_SPEC["capacity"]["tolerance"]
    assert refined == int(fine.sum())
    assert frame["refine_to"].isna().all()


def test_two_drivers_of_different_specs_on_one_database(tmp_path, any_db_url):
    wide = _spec_dir(tmp_path, "wide")
    narrow = _spec_dir(tmp_path, "narrow", skus=["a100-80gb"], workload={
        "source": "chat", "num_requests": 120})  # fmt: skip
    first, second = _driver(wide, any_db_url), _driver(narrow, any_db_url)
    for code, _, err in (_finish(first), _finish(second)):
        assert code == 0, err
    db = open_database(any_db_url)
    by_name = {job.spec_fingerprint: job for job in db.list_jobs()}
    narrow_job = by_name[load_spec(narrow).fingerprint()]
    frame = db.results(narrow_job.id)
    assert len(frame) == 4 and set(frame["sku"]) == {"a100-80gb"}  # its own space only


def _session_processes(session: int) -> list[int]:
    """Live processes of a session (the driver started with start_new_session and its pool)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == session:  # state, ppid, pgrp, session
            pids.append(int(entry.name))
    return pids


def _wait_for_done(db_url: str, at_least: int, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if open_database(db_url).configuration_counts()["done"] >= at_least:
                return
        except DatabaseError:
            pass  # no job registered yet
        time.sleep(0.2)
    raise AssertionError("the driver finished or stalled before the point of the test")


def _wait_until_gone(session: int, timeout: float = 20.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := _session_processes(session)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_sigterm_records_cancelled_and_ends_the_workers(tmp_path):
    spec = _spec_dir(tmp_path, "t", workload={"source": "chat", "num_requests": 400})
    db_url = f"sqlite:///{tmp_path / 't.db'}"
    driver = _driver(spec, db_url)
    _wait_for_done(db_url, 1, driver)
    os.kill(driver.pid, signal.SIGTERM)  # as `search cancel` (Ray's job stop) does
    code, out, err = _finish(driver)
    assert code == 130 and "Traceback" not in err, err
    assert "cancelled" in out
    job = open_database(db_url).latest_job()
    assert job.status == "cancelled" and "SIGTERM" in job.error
    assert _wait_until_gone(driver.pid) == []


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_killed_driver_shows_interrupted_and_leaves_no_workers(tmp_path):
    spec = _spec_dir(tmp_path, "k", workload={"source": "chat", "num_requests": 400})
    db_url = f"sqlite:///{tmp_path / 'k.db'}"
    driver = _driver(spec, db_url)
    _wait_for_done(db_url, 1, driver)
    os.kill(driver.pid, signal.SIGKILL)  # the driver only: its pool workers must follow
    driver.communicate(timeout=30)
    assert _wait_until_gone(driver.pid) == []
    time.sleep(float(LEASE_S) + 0.5)
    listed = subprocess.run(
        [LLMCAP, "jobs", "list", "--db", db_url], env=_env(), capture_output=True, text=True
    )
    assert "interrupted" in listed.stdout and "--resume 1" in listed.stdout, listed.stdout
    # a counted job: only its own configurations, 8
    assert re.search(r"\d/8 done", listed.stdout), listed.stdout
    # a second driver takes over the dead one's claims at once (they have expired)
    again = _driver(spec, db_url, "--resume", "1")
    code, _, err = _finish(again)
    assert code == 0, err
    db = open_database(db_url)
    assert db.get_job(1).status == "succeeded"
    assert len(db.results(1, status="done")) == 8


def test_a_refinement_interrupted_is_finished_by_the_resumed_job(tmp_path, monkeypatch):
    """Killed half-way through refinement, then resumed: the same results as a run that was
    never interrupted (the refinements decided are kept in the database)."""
    spec_path = write_spec(tmp_path, workload={"source": "chat", "num_requests": 300},
                           capacity={"tolerance": 0.3, "refine_tolerance": 0.02})  # fmt: skip
    spec = load_spec(spec_path)
    whole = open_database(f"sqlite:///{tmp_path / 'whole.db'}")
    SearchDriver(spec, whole, "inline").run()
    reference = whole.results(1, status="done").set_index("fingerprint").sort_index()
    assert (reference["tolerance"] == 0.02).sum() >= 2, "the test needs two refinements"

    broken = open_database(f"sqlite:///{tmp_path / 'broken.db'}")
    real_record = broken.record_result
    refined = []

    def record_then_die(cid, result):
        real_record(cid, result)
        if result.tolerance == 0.02:
            refined.append(cid)
            raise KeyboardInterrupt  # after the first refinement is stored

    monkeypatch.setattr(broken, "record_result", record_then_die)
    with pytest.raises(KeyboardInterrupt):
        SearchDriver(spec, broken, "inline").run()
    assert broken.get_job(1).status == "cancelled" and len(refined) == 1
    monkeypatch.undo()
    SearchDriver(spec, broken, "inline").run(1)
    resumed = broken.results(1, status="done").set_index("fingerprint").sort_index()
    columns = ["capacity_qps", "capacity_upper_qps", "tolerance", "slo_passed"]
    assert resumed[columns].equals(reference[columns])
