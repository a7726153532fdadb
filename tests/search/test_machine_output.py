"""--json / --csv on every command that prints a table: they parse and carry its figures."""

from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner

from search.cli import cli


def _out(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize(
    ("command", "key", "expected"),
    [
        (("catalog", "skus"), "id", "h100-sxm"),
        (("catalog", "models"), "name", "meta-llama/Llama-3.1-8B"),
        (("catalog", "workloads"), "name", "chat"),
    ],
)
def test_catalog_rows_as_json_and_csv(command, key, expected) -> None:
    rows = json.loads(_out(*command, "--json"))
    table = list(csv.DictReader(io.StringIO(_out(*command, "--csv"))))
    assert [r[key] for r in rows] == [r[key] for r in table]
    assert expected in [r[key] for r in rows]
    assert expected in _out(*command)  # the table shows the same rows


def test_results_and_jobs_as_json_and_csv(finished_job_db) -> None:
    listed = json.loads(_out("results", "list", "--db", finished_job_db, "--json"))
    as_csv = _out("results", "list", "--db", finished_job_db, "--csv")
    table = list(csv.DictReader(io.StringIO(as_csv)))
    assert [r["label"] for r in listed] == [r["label"] for r in table]
    assert [float(r["qps_per_dollar"]) for r in table] == [r["qps_per_dollar"] for r in listed]
    assert f"{listed[0]['qps_per_dollar']:.3f}" in _out("results", "list", "--db", finished_job_db)
    shown = json.loads(_out("results", "show", "--db", finished_job_db, "--json"))
    assert shown["configurations"]["done"] == 2 and shown["status"] == "succeeded"
    assert all(r["slo_passed"] for rows in shown["frontiers"].values() for r in rows)
    jobs = json.loads(_out("jobs", "list", "--db", finished_job_db, "--json"))
    (job,) = jobs
    assert job["name"] == "tiny" and job["done"] == 2
    (row,) = csv.DictReader(io.StringIO(_out("jobs", "list", "--db", finished_job_db, "--csv")))
    assert row["name"] == "tiny" and row["done"] == "2"


def test_every_table_command_fits_80_columns_through_a_pipe(finished_job_db) -> None:
    """CliRunner is a pipe (not a terminal): tables keep to COLUMNS=80 and never shorten an
    id, a name or a number a user reads back."""
    for args in (
        ("catalog", "skus"), ("catalog", "models"), ("catalog", "workloads"),
        ("jobs", "list", "--db", finished_job_db),
        ("results", "list", "--db", finished_job_db),
        ("results", "show", "--db", finished_job_db),
    ):  # fmt: skip
        out = _out(*args)
        assert "…" not in out, args
        assert max(len(line) for line in out.splitlines()) <= 80, args
    jobs = _out("jobs", "list", "--db", finished_job_db)
    assert " 1 " in jobs and "tiny" in jobs and "2/2 done" in jobs
