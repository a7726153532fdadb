"""Pruning when a job wants only the best configuration (`strategy.prune`, `PruneCheck`)."""

from __future__ import annotations

import math

import pytest

from search._capacity import (
    CapacitySearchOptions,
    LatencySLO,
    PruneCheck,
    find_capacity,
    unit_arrival_times,
)
from search._pareto import best_configuration
from simulator._deployment import PreparedDeployment
from tests.search.conftest import write_spec
from tests.search.test_capacity import _chat, _deployment
from tests.search.test_driver import run_job

FILTERS = (LatencySLO("ttft", 90, 2.0), LatencySLO("tbt", 99, 0.05))


@pytest.fixture(scope="module")
def prepared() -> PreparedDeployment:
    return _deployment()


@pytest.fixture(scope="module")
def workload():
    return _chat(300)


@pytest.fixture(scope="module")
def found(prepared, workload):
    return find_capacity(prepared, workload)


def _full_run_meets(prepared, workload, qps: float, slos) -> bool:
    scaled = workload.with_arrival_times(unit_arrival_times(workload) / qps)
    summary = prepared.simulate(scaled).summary
    return all(slo.passed(summary) for slo in slos)


@pytest.mark.parametrize("share", [0.3, 0.6, 0.9, 1.2, 2.0])
def test_a_configuration_is_pruned_exactly_when_the_full_run_misses_an_slo(
    prepared, workload, found, share
):
    qps = share * found.capacity_qps
    result = find_capacity(prepared, workload, prune=PruneCheck(qps, FILTERS))
    meets = _full_run_meets(prepared, workload, qps, (CapacitySearchOptions().slo, *FILTERS))
    assert (result.pruned is None) == meets
    assert result.probes[0].qps == qps
    if result.pruned is not None:
        assert result.capacity_qps == 0.0 and result.summary is None
        assert result.num_simulations == 1 and f"{qps:.4g} req/s" in result.pruned
    else:  # passing the check, the search is the one it would have been
        assert result.probes[0].passed and result.probes[0].kind == "check"
        assert result.capacity_qps == found.capacity_qps
        assert result.failing_qps == found.failing_qps


def test_a_search_that_passes_the_check_skips_the_rates_known_to_pass(prepared, workload, found):
    qps = 0.95 * found.capacity_qps
    result = find_capacity(prepared, workload, prune=PruneCheck(qps))
    assert result.pruned is None
    check, *searched = result.probes
    assert check.kind == "check" and check.qps == qps
    # the probes of the search without a check, in the same order, with the same verdicts
    assert [(p.qps, p.passed) for p in searched] == [(p.qps, p.passed) for p in found.probes]
    known = [p for p in searched if p.kind == "known"]
    assert known and all(p.qps <= qps and p.iterations == 0 for p in known)
    assert result.num_simulations == 1 + len(searched) - len(known)
    assert result.capacity_qps == found.capacity_qps and result.failing_qps == found.failing_qps
    assert result.summary["latency_s"] == found.summary["latency_s"]


def test_without_a_best_yet_only_the_zero_load_check_runs(prepared, workload, found):
    result = find_capacity(prepared, workload, prune=PruneCheck(0.0, FILTERS))
    assert result.pruned is None
    assert result.capacity_qps == found.capacity_qps  # the same search, probe for probe
    assert [p.qps for p in result.probes] == [p.qps for p in found.probes]


def test_a_filter_missed_even_at_zero_load_prunes_without_a_simulation(prepared, workload):
    impossible = LatencySLO("tbt", 99, 1e-4)
    result = find_capacity(prepared, workload, prune=PruneCheck(1.0, (impossible,)))
    assert result.pruned is not None and "zero load" in result.pruned
    assert result.num_simulations == 0 and math.isinf(result.failing_qps)


@pytest.mark.parametrize("ttft_max_s", [5.0, 3.5])
def test_the_pruned_job_recommends_what_the_complete_job_does(tmp_path, ttft_max_s):
    """With TTFT P90 < 5 s, most configurations cannot beat the best and are pruned; with
    3.5 s every best of the moment fails its filters once refined, so the configurations
    pruned against it are searched again, and in the end none is left out."""
    space = {
        "tp": [1, 2],
        "schedulers": {
            "sarathi": {"batch_size": [32, 128], "chunk_size": [512]},
            "vllm": {"batch_size": [64]},
        },
    }
    filters = [
        {"metric": "ttft", "percentile": 90, "max_s": ttft_max_s},
        {"metric": "tbt", "percentile": 99, "max_s": 0.2},
    ]
    slo = {"filters": filters, "max_rejected_share": 0.05}
    both = {}
    for prune in (False, True):
        spec = write_spec(
            tmp_path, space=space, slo=slo, strategy={"kind": "grid", "prune": prune}
        )
        _, db, report = run_job(spec, f"sqlite:///{tmp_path / f'{prune}.db'}")
        frame = db.results(report.job_id, status="done")
        both[prune] = (report, frame, best_configuration(frame))
    complete, pruned = both[False], both[True]
    assert not complete[0].pruned and len(complete[1]) == 12
    assert len(pruned[1]) + len(pruned[0].pruned) == 12  # the pruned have no result
    # the others were searched as the complete job searched them
    cols = ["fingerprint", "tolerance", "capacity_qps", "capacity_upper_qps", "slo_passed"]
    both_rows = pruned[1][cols].merge(complete[1][cols], on=["fingerprint", "tolerance"])
    assert len(both_rows) >= len(pruned[1]) - 2  # the complete job may have refined a few more
    assert (both_rows["capacity_qps_x"] == both_rows["capacity_qps_y"]).all()
    assert (both_rows["slo_passed_x"] == both_rows["slo_passed_y"]).all()
    if ttft_max_s == 5.0:
        assert len(pruned[0].pruned) >= 6
        assert pruned[0].simulations < complete[0].simulations
        assert pruned[2] is not None
        assert pruned[2]["params"] == complete[2]["params"]
        assert pruned[2]["qps_per_dollar"] == pytest.approx(complete[2]["qps_per_dollar"], rel=0.02)
    else:
        assert not pruned[0].pruned
        assert complete[2] is None and pruned[2] is None
