"""What `llmcap results` and exports say about capacity kinds and rejected requests."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from search._db import open_database
from search._spec import parse_spec
from search.cli import cli
from tests.search.conftest import TINY_SPEC, stored_config, stored_result


@pytest.fixture
def db_url(tmp_path: Path) -> str:
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


def _run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_best_recommends_the_measured_one_and_names_the_ceiling_one(db_url: str) -> None:
    out = _run("results", "best", "--db", db_url)
    assert "Recommended measured one" in out
    assert "measured on 4,000 requests; 3 of them rejected" in out
    assert "Not recommended ceiling one" in out
    assert "rests on the analytic ceiling, not a measurement" in out


def test_list_shows_kind_and_rejected(db_url: str) -> None:
    out = _run("results", "list", "--db", db_url)
    assert "measured 4000" in out and "ceiling 4000" in out
    assert out.index("measured one") < out.index("ceiling one")  # measured ranks first


@pytest.mark.parametrize("suffix", [".csv", ".json", ".parquet"])
def test_exports_carry_kind_requests_and_rejected(db_url: str, tmp_path: Path, suffix) -> None:
    out = tmp_path / f"all{suffix}"
    _run("results", "export", "--db", db_url, "--out", str(out))
    if suffix == ".csv":
        frame = pd.read_csv(out)
    elif suffix == ".json":
        frame = pd.DataFrame(json.loads(out.read_text()))
    else:
        frame = pd.read_parquet(out)
    rows = frame.set_index("label")
    assert rows.loc["measured one", "capacity_kind"] == "measured"
    assert rows.loc["ceiling one", "capacity_kind"] == "ceiling"
    assert rows["num_requests"].tolist() == [4000, 4000]
    assert sorted(rows["rejected_requests"].tolist()) == [0, 3]
    # the order of `results list`; latencies named with their unit
    assert frame["label"].tolist() == ["measured one", "ceiling one"]
    assert rows.loc["measured one", "ttft_p90_s"] == 0.5 and "ttft_p90" not in frame.columns
    params = rows.loc["measured one", "params"]
    if suffix != ".json":  # flat formats: nested columns as JSON text
        assert json.loads(params)["label"] == "measured one"
        assert json.loads(rows.loc["measured one", "slo_detail"]) is not None
    else:
        assert params["label"] == "measured one"


def test_best_as_json_names_the_recommendation_and_the_ceiling_rival(db_url: str) -> None:
    result = CliRunner().invoke(cli, ["results", "best", "--db", db_url, "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    assert answer["recommended"]["label"] == "measured one"
    assert answer["recommended"]["ttft_p90_s"] == 0.5
    assert answer["not_recommended"]["label"] == "ceiling one"
    budget = answer["for_budget"]
    assert budget["gpus"] == budget["units"] * 1 <= budget["max_gpus"]
    assert budget["capacity_qps"] == pytest.approx(10.0 * budget["units"])


def test_best_exits_1_when_nothing_qualifies(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'none.db'}"
    spec = parse_spec(TINY_SPEC)
    db = open_database(url)
    job = db.create_job("tiny", spec.model_dump_json(), spec.fingerprint())
    (cid,) = db.register_configurations(job.id, spec.fingerprint(), [stored_config(1, "slow one")])
    failing = stored_result(1.0, "measured", upper=1.05)
    failing.slo_passed = False
    failing.slo_detail = {
        "ttft_p90": {"passed": False, "value": 3.1, "max_s": 2.0},
        "tbt_p99": {"passed": True, "value": 0.05, "max_s": 0.2},
    }
    db.record_result(cid, failing)
    db.finish_job(job.id, "succeeded")
    db.close()
    plain = CliRunner().invoke(cli, ["results", "best", "--db", url], env={"COLUMNS": "250"})
    assert plain.exit_code == 1 and "no configuration meets the SLOs" in plain.output
    # which filter failed, by how much, and the semantics that would let it qualify
    assert "ttft_p90 < 2 s: missed by 1 of 1; the closest reached 3.1 s (1.6x the bound)" in (
        plain.output
    )
    assert "tbt_p99 < 0.2 s: missed" not in plain.output
    assert "capacity_meets_filters: true" in plain.output
    as_json = CliRunner().invoke(cli, ["results", "best", "--db", url, "--json"])
    assert as_json.exit_code == 1
    answer = json.loads(as_json.output)
    assert answer["recommended"] is None and "meets the SLOs" in answer["why"]


def test_list_as_json_carries_the_table_figures(db_url: str) -> None:
    result = CliRunner().invoke(cli, ["results", "list", "--db", db_url, "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["label"] for r in rows] == ["measured one", "ceiling one"]
    assert [r["capacity_qps"] for r in rows] == [10.0, 25.0]
    assert rows[0]["tbt_p99_s"] == 0.05
