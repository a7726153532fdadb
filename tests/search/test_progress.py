"""Progress of a search job: a plain line off a terminal, the time left at the pace so far."""

from __future__ import annotations

import io
import json

from click.testing import CliRunner
from rich.console import Console

from search._db import open_database
from search._driver import JobProgress
from search._progress import eta_seconds, format_duration, job_progress, progress_line
from search._spec import parse_spec
from search.cli import cli
from tests.search.conftest import TINY_SPEC, stored_config, stored_result


def test_eta_is_the_pace_so_far() -> None:
    assert eta_seconds(30.0, 3, 12) == 90.0
    assert eta_seconds(30.0, 0, 12) is None  # nothing finished: no pace yet
    assert eta_seconds(30.0, 12, 12) == 0.0
    assert [format_duration(s) for s in (None, 42, 125, 7384)] == [
        "-", "42 s", "2 min 05 s", "2 h 03 min",
    ]  # fmt: skip


def test_off_a_terminal_progress_is_plain_lines_at_most_every_n_seconds() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    progress = JobProgress(total=10, done=0, running=2)
    with job_progress(console, every_s=3600.0) as show:
        show(progress)  # the first call always prints
        for done in range(1, 10):
            progress.done = done
            show(progress)  # within the hour: no more lines
        progress.best_qps_per_dollar, progress.best_label = 1.5, "h100-sxm TP2"
        progress.done = 10
        show(progress)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2  # the first, and the last when the job ends
    assert lines[0].startswith("progress: 0/10 configurations, 2 running, 0 failed; best -")
    assert "10/10 configurations" in lines[1] and "1.500 QPS per $/h (h100-sxm TP2)" in lines[1]
    assert "ETA 0 s" in lines[1]
    assert progress_line(progress, 5.0).endswith("elapsed 5 s, ETA 0 s")


def test_jobs_list_shows_a_running_jobs_eta_and_prints_json(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    spec = parse_spec(TINY_SPEC)
    db = open_database(url)
    job = db.create_job("tiny", spec.model_dump_json(), spec.fingerprint())
    db.start_job(job.id, driver="driver-1")  # alive: a fresh heartbeat
    ids = db.register_configurations(
        job.id, spec.fingerprint(), [stored_config(i, f"config {i}") for i in range(4)]
    )
    db.close()

    def listed() -> dict:
        result = CliRunner().invoke(cli, ["jobs", "list", "--db", url, "--json"])
        assert result.exit_code == 0, result.output
        (row,) = json.loads(result.output)
        return row

    row = listed()
    assert (row["id"], row["name"], row["status"]) == (job.id, "tiny", "running")
    assert (row["done"], row["configurations"], row["eta_s"]) == (0, 4, None)  # no pace yet
    db = open_database(url)
    for cid in ids[:2]:
        db.record_result(cid, stored_result(10.0, "measured", upper=10.4))
    db.close()
    row = listed()
    assert (row["done"], row["configurations"]) == (2, 4) and row["eta_s"] >= 0.0
    table = CliRunner().invoke(cli, ["jobs", "list", "--db", url], env={"COLUMNS": "200"})
    assert "ETA" in table.output and "2/4 done" in table.output
