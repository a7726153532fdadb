"""A small search over aggregated and disaggregated deployments, end to end: the pools are
simulated, priced, stored, read back, listed and plotted."""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner

from search._db import open_database
from search._driver import SearchDriver
from search._plot import DISAGG_LEGEND, _matplotlib_figure, _panels
from search._results_view import ranked_results
from search._space import ConfigPoint, expand_space
from search._spec import parse_spec
from search._strategy import make_study, params_of, suggest
from search.cli import cli
from tests.search.conftest import TINY_SPEC, stored_config, stored_result

SPLIT_SPEC = {
    **TINY_SPEC,
    "name": "split",
    "budget": {"max_gpus": 2},
    "space": {
        "tp": [1],
        "replicas": [1, 2],
        "mode": ["aggregated", "disaggregated"],
        "disaggregated": {
            "prefill": {"skus": ["h100-sxm"], "replicas": [1]},
            "decode": {"skus": ["a100-80gb"], "replicas": [1]},
        },
        "schedulers": {"sarathi": {"batch_size": [64], "chunk_size": [512]}},
    },
}


@pytest.fixture(scope="module")
def split_job(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('split') / 'r.db'}"
    spec = parse_spec(SPLIT_SPEC)
    db = open_database(url)
    report = SearchDriver(spec, db, "inline").run()
    return spec, db, url, report


def test_the_split_is_simulated_priced_and_stored_with_its_pools(split_job) -> None:
    spec, db, _, report = split_job
    assert report.status == "succeeded" and report.failed == 0
    assert report.evaluated == 5  # 2 SKUs x 1-2 replicas aggregated, one 1P1D split
    frame = ranked_results(db, report.job_id)
    split = frame[frame["layout"] == "disaggregated"]
    assert len(split) == 1 and (frame["layout"] == "aggregated").sum() == 4
    row = split.iloc[0]
    # the decode batch cap left out of the space: the engine's, 128 under vidur
    assert row["params"]["decode"] == {
        "sku": "a100-80gb", "tp": 1, "replicas": 1, "batch_size": 128, "link": "auto"
    }  # fmt: skip
    assert row["pools"] == "1P1D TP1/TP1" and row["num_gpus"] == 2
    # both pools' GPUs, each at its SKU's price: one H100 ($6.88/h) and one A100-80GB ($3.4309/h)
    assert row["cost_per_hour"] == pytest.approx(6.88 + 3.4309)
    assert row["capacity_qps"] > 0
    assert row["qps_per_dollar"] == pytest.approx(row["capacity_qps"] / (6.88 + 3.4309))
    # the stored layout builds the same deployment again
    point = ConfigPoint.from_dict(row["params"])
    assert point in expand_space(spec)
    deployment = point.deployment(spec)
    assert deployment.decode.sku.id == "a100-80gb" and deployment.sku.id == "h100-sxm"


def test_a_second_run_reuses_the_split_by_its_fingerprint(split_job) -> None:
    spec, db, _, first = split_job
    again = SearchDriver(spec, db, "inline").run()
    assert again.evaluated == 0 and again.cached == first.evaluated


def test_results_list_shows_the_pools(split_job) -> None:
    _, _, url, report = split_job
    result = CliRunner().invoke(
        cli, ["results", "list", str(report.job_id), "--db", url, "--wide"],
        env={"COLUMNS": "250"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    text = result.output
    assert "pools" in text and "1P1D TP1/TP1" in text and "aggregated" in text
    assert "prefill h100-sxm TP1 PP1 sarathi b64 c512 + decode a100-80gb TP1 x1 b128" in text


def test_configurations_stored_before_pools_read_as_aggregated(tmp_path) -> None:
    spec = parse_spec(TINY_SPEC)
    db = open_database(f"sqlite:///{tmp_path / 'old.db'}")
    job = db.create_job("old", spec.model_dump_json(), spec.fingerprint())
    (cid,) = db.register_configurations(job.id, spec.fingerprint(), [stored_config(1, "old")])
    db.record_result(cid, stored_result(10.0, "measured", upper=10.4))
    frame = ranked_results(db, job.id)
    assert list(frame["layout"]) == ["aggregated"] and list(frame["pools"]) == ["aggregated"]


def test_the_plot_boxes_the_disaggregated_points(split_job) -> None:
    _, db, _, report = split_job
    frame = ranked_results(db, report.job_id)
    panels = _panels(frame, {"ttft_p90": 2.0, "tbt_p99": 0.2}, None)
    assert [int(p.disaggregated.sum()) for p in panels] == [1, 1]
    # a frontier point is labelled by its pools when disaggregated, else its parallelism
    for panel in panels:
        tags = {t for t, d in zip(panel.parallelism, panel.disaggregated, strict=True) if d}
        assert tags == {"1P1D TP1/TP1"}
        assert set(panel.parallelism) - tags == {"TP1 PP1"}
    fig = _matplotlib_figure(panels, "split")
    for ax, panel in zip(fig.axes[:2], panels, strict=True):
        (boxes,) = [c for c in ax.collections if c.get_gid() == "disaggregated"]
        (i,) = panel.disaggregated.nonzero()[0]
        assert boxes.get_offsets().tolist() == [[panel.x[i], panel.y[i]]]
    legend_texts = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert DISAGG_LEGEND in legend_texts
    # an aggregated-only job has no box and no legend entry for it
    plain = frame[frame["layout"] == "aggregated"]
    fig = _matplotlib_figure(_panels(plain, {}, None), "")
    assert not any(c.get_gid() == "disaggregated" for ax in fig.axes for c in ax.collections)
    assert DISAGG_LEGEND not in [t.get_text() for lg in fig.legends for t in lg.get_texts()]


def test_html_plot_boxes_the_disaggregated_points(split_job) -> None:
    pytest.importorskip("plotly")
    from search._plot import _plotly_figure

    _, db, _, report = split_job
    fig = _plotly_figure(_panels(ranked_results(db, report.job_id), {}, None), "split")
    boxes = [t for t in fig.data if t.meta == "disaggregated"]
    assert len(boxes) == 2 and all(len(t.x) == 1 for t in boxes)
    assert boxes[0].name == DISAGG_LEGEND and boxes[0].showlegend


def test_optuna_trials_reproduce_each_layout() -> None:
    spec = parse_spec(SPLIT_SPEC)
    study = make_study(spec)
    points = expand_space(spec)
    for point in points:
        study.enqueue_trial(params_of(point))
    asked = [suggest(study.ask(), spec) for _ in points]
    assert asked == points


MOE_SPLIT = {
    "model": "deepseek-ai/DeepSeek-V3", "skus": ["b200"], "engine": "sglang",
    "workload": {"source": "chat", "num_requests": 40}, "budget": {"max_gpus": 32},
    "space": {"tp": [8], "ep": [8], "precision": ["fp8"], "mode": ["disaggregated"],
              "disaggregated": {"prefill": {"dp": [1, 2], "tp": [4, 8], "replicas": [1]},
                                "decode": {"tp": [1, 8], "dp": [1, 8], "replicas": [1]}}},
}  # fmt: skip


def test_optuna_trials_reproduce_each_pools_expert_and_attention_dp_layout() -> None:
    """Each pool's EP and DP are trial parameters of their own (prefill.ep, decode.dp, ...):
    a grid enqueues every configuration and asks it back, none left pending in its place."""
    spec = parse_spec(MOE_SPLIT)
    study = make_study(spec)
    points = expand_space(spec)
    assert {(p.dp, p.decode.dp) for p in points} == {(1, 1), (1, 8), (2, 1), (2, 8)}
    for point in points:
        study.enqueue_trial(params_of(point))
    asked = [suggest(study.ask(), spec) for _ in points]
    assert asked == points


def test_the_recommendation_counts_a_split_unit_by_both_pools() -> None:
    from search._results_view import _budget_units, _unit

    spec = parse_spec({**SPLIT_SPEC, "budget": {"max_gpus": 16}})
    split = pd.Series({"layout": "disaggregated", "pools": "2P1D TP4/TP4", "num_gpus": 12,
                       "replicas": 2, "tp": 4, "pp": 1})  # fmt: skip
    assert _budget_units(split, spec) == 1 and _unit(split) == "2P1D TP4/TP4 pools"
    plain = pd.Series({"layout": "aggregated", "num_gpus": 4, "replicas": 2, "tp": 2, "pp": 1})
    assert _budget_units(plain, spec) == 4 and _unit(plain) == "2 replica(s)"


def test_a_plan_reprices_each_pool_at_its_own_sku() -> None:
    from search._plan._sizing import repriced
    from sku_catalog import load_catalog

    frame = pd.DataFrame({
        "configuration_id": [1, 2], "sku": ["h100-sxm", "h100-sxm"], "num_gpus": [12, 8],
        "params": [{"sku": "h100-sxm", "tp": 4, "pp": 1, "replicas": 2,
                    "decode": {"sku": "h200", "tp": 4, "replicas": 1, "batch_size": 128}},
                   {"sku": "h100-sxm", "tp": 4, "pp": 1, "replicas": 2}],
        "capacity_qps": [24.0, 10.0], "throughput_tokens_per_s": [5000.0, 2000.0],
        "slo_passed": [True, True], "capacity_kind": ["measured", "measured"],
    })  # fmt: skip
    out = repriced(frame, load_catalog()).set_index("configuration_id")
    assert out.loc[1, "cost_per_hour"] == pytest.approx(8 * 6.88 + 4 * 7.912)
    assert out.loc[2, "cost_per_hour"] == pytest.approx(8 * 6.88)
    assert out.loc[1, "qps_per_dollar"] == pytest.approx(24.0 / (8 * 6.88 + 4 * 7.912))


def test_zero_load_decode_bounds_use_the_decode_pool_and_the_ceiling_holds() -> None:
    """TBT at zero load is a decode step alone on a decode replica (here TP4, slower than
    the TP8 prefill pool's would be); the analytic ceiling bounds the measured capacity."""
    from estimators import load_engine, load_model
    from search._capacity import CapacitySearchOptions, LatencySLO, find_capacity
    from search._zero_load import zero_load_percentile
    from simulator import DecodeSpec, Deployment, engine_scheduler, prepare
    from sku_catalog import load_catalog
    from workloads import build_workload

    h100, engine = load_catalog().get("h100-sxm"), load_engine("vllm")
    model = load_model("meta-llama/Llama-3.1-70B")

    def deployment(tp: int, decode_tp: int | None = None) -> Deployment:
        decode = None
        if decode_tp is not None:
            decode = DecodeSpec(h100, decode_tp, 1, engine_scheduler(engine, h100, decode_tp))
        return Deployment(model, h100, tp=tp, engine=engine,
                          scheduler=engine_scheduler(engine, h100, tp), decode=decode)  # fmt: skip

    workload = build_workload({"source": "chat"}, num_requests=200, qps=1.0, concurrency=None,
                              seed=0)  # fmt: skip
    split = prepare(deployment(8, decode_tp=4))
    tp4, tp8 = prepare(deployment(4)), prepare(deployment(8))
    tbt = zero_load_percentile(split, workload, "tbt", 99)
    assert tbt == zero_load_percentile(tp4, workload, "tbt", 99)
    assert tbt > zero_load_percentile(tp8, workload, "tbt", 99)
    assert zero_load_percentile(split, workload, "ttft", 90) == zero_load_percentile(
        tp8, workload, "ttft", 90
    )  # the first token comes from the prefill pool
    found = find_capacity(
        split, workload, CapacitySearchOptions(LatencySLO("scheduling_delay", 99, 5.0))
    )
    assert 0 < found.capacity_qps <= found.upper_bound_qps
