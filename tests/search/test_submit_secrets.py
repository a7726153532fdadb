"""`llmcap search submit` to a real Ray head (loopback): a database password reaches the
driver only from the head's own environment, and shows nowhere else; the upload holds what
was listed and no dotfile.

The places searched for the password are the ones anyone with access to the cluster or the
head can read: the Jobs API (the dashboard's /api/jobs/ and `ray job list`, entrypoint and
runtime_env included), the job's logs, and every file Ray keeps on the head (session logs,
the unpacked working directories).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from search._ray_jobs import _client
from tests.search.conftest import TINY_SPEC
from tests.search.test_jobs_cli import _env, _free_port, llmcap, running_ray_head

SECRET = "S3cr3t-e8d1f0a7-not-for-logs"
PASSWORD_VAR = "LLMCAP_TEST_DB_PASSWORD"
CLOSED_PORT = _free_port()  # nothing listens there: the driver fails to connect, at once
DB_URL = f"postgresql://llmcap:{SECRET}@127.0.0.1:{CLOSED_PORT}/llmcap"
MASKED = f"llmcap:***@127.0.0.1:{CLOSED_PORT}/llmcap"


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    """A Ray head on loopback with its own temp dir, whose environment holds the password
    (as a Kubernetes secret would set it): yields (dashboard URL, Ray's temp dir)."""
    temp_dir = tmp_path_factory.mktemp("ray")
    env = {**_env(), PASSWORD_VAR: SECRET, "LLMCAP_DB": DB_URL}
    with running_ray_head(env, temp_dir) as url:
        yield url, temp_dir


def _spec_folder(tmp_path: Path) -> Path:
    spec = {**TINY_SPEC, "workload": {"source": "traces/tiny.csv", "num_requests": 150}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "tiny.csv").write_text("arrival_time,num_prefill_tokens\n")
    (tmp_path / "notes.md").write_text("uploaded\n")
    (tmp_path / ".env").write_text(f"PGPASSWORD={SECRET}\n")
    (tmp_path / ".config").mkdir()
    (tmp_path / ".config" / "db.ini").write_text(f"password={SECRET}\n")
    (tmp_path / ".gitignore").write_text("*.log\n")
    (tmp_path / "debug.log").write_text(f"{SECRET}\n")
    return tmp_path / "spec.yaml"


def _wait(address: str, job_id: str) -> str:
    deadline = time.monotonic() + 180
    while True:
        status = llmcap("search", "status", job_id, "--address", address).stdout.strip()
        if status in ("SUCCEEDED", "FAILED", "STOPPED") or time.monotonic() > deadline:
            return status
        time.sleep(1)


def _files_holding(root: Path, text: str) -> list[str]:
    needle = text.encode()
    found = []
    for path in root.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                found.append(str(path.relative_to(root)))
        except OSError:
            continue  # a socket, a file removed meanwhile
    return found


def test_the_password_is_found_in_no_place_after_a_submit(tmp_path, head) -> None:
    address, temp_dir = head
    spec = _spec_folder(tmp_path)
    jobs = {}
    # the URL with its password, the password named on the head; and the head's LLMCAP_DB
    for how, extra in {
        "--db": ["--db", DB_URL, "--db-password-env", PASSWORD_VAR],
        "LLMCAP_DB": [],
    }.items():
        submitted = llmcap("search", "submit", str(spec), "--address", address, *extra)
        assert submitted.returncode == 0, submitted.stderr
        assert SECRET not in submitted.stdout + submitted.stderr
        listing = submitted.stderr
        assert "uploading 3 file(s)" in listing, listing
        for name in ("spec.yaml", "traces/tiny.csv", "notes.md"):
            assert name in listing
        assert ("the password in --db was removed" in listing) is (how == "--db")
        jobs[how] = submitted.stdout.strip().splitlines()[-1]

    for how, job_id in jobs.items():
        assert _wait(address, job_id) == "FAILED"  # nothing listens on the database port
        logs = llmcap("search", "logs", job_id, "--address", address)
        # the driver had the password (from the head) and printed the URL masked
        assert MASKED in logs.stdout, (how, logs.stdout)
        assert SECRET not in logs.stdout + logs.stderr

    client = _client(address)
    listed = client.list_jobs()  # what `ray job list` shows
    assert {job.submission_id for job in listed} >= set(jobs.values())
    assert SECRET not in repr(listed)
    for job in listed:
        assert SECRET not in job.entrypoint and SECRET not in repr(job.runtime_env)
    api = client._do_request("GET", "/api/jobs/")  # the dashboard's JSON
    assert api.status_code == 200 and jobs["--db"] in api.text
    assert SECRET not in api.text
    assert PASSWORD_VAR in api.text  # env_vars are public: only the variable's name is sent

    # every file Ray wrote on the head: session logs, job driver logs, unpacked packages
    assert list(temp_dir.glob("session_*/logs/*job*")), "no Ray session logs to search"
    assert _files_holding(temp_dir, SECRET) == []

    # the unpacked working directory holds the listed files and no dotfile
    (package,) = {
        p.resolve().parent for p in temp_dir.glob("session_*/runtime_resources/**/spec.yaml")
    }
    uploaded = sorted(str(p.relative_to(package)) for p in package.rglob("*") if p.is_file())
    assert uploaded == ["notes.md", "spec.yaml", "traces/tiny.csv"]
