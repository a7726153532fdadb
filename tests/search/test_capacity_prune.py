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
from search._results_view import with_labels
from search._zero_load import zero_load_headroom, zero_load_percentile
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
    assert result.probes[0].qps == qps and result.probes[0].kind == "check"
    assert result.probes[0].passed == meets
    if not meets:
        assert result.capacity_qps == 0.0 and result.summary is None
        assert result.num_simulations == 1 and f"{qps:.4g} req/s" in result.pruned
        assert result.pruned is not None
    elif result.pruned is None:  # passing the check, the search is the one it would have been
        assert result.capacity_qps == found.capacity_qps
        assert result.failing_qps == found.failing_qps
        assert all(f.passed(result.summary) for f in FILTERS)
    else:  # or it stopped at a rate under the capacity that misses a filter
        assert "under its capacity" in result.pruned
        assert not all(f.passed(found.summary) for f in FILTERS)


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


def test_without_a_best_yet_the_search_is_the_usual_one(prepared, workload, found):
    loose = (LatencySLO("ttft", 90, 30.0), LatencySLO("tbt", 99, 1.0))
    result = find_capacity(prepared, workload, prune=PruneCheck(0.0, loose))
    assert result.pruned is None
    assert [p.qps for p in result.probes] == [p.qps for p in found.probes]
    assert result.capacity_qps == found.capacity_qps


def test_a_passing_rate_that_misses_a_filter_stops_the_search(prepared, workload, found):
    """TBT P99 < 50 ms is missed at the capacity: the search stops at the first passing rate
    that misses it, before the bracket is narrow."""
    assert not FILTERS[1].passed(found.summary)
    result = find_capacity(prepared, workload, prune=PruneCheck(0.0, FILTERS))
    assert result.pruned is not None and "tbt_p99 < 0.05 s" in result.pruned
    assert result.num_simulations < found.num_simulations
    stopped_at = result.probes[-1]
    assert stopped_at.passed and stopped_at.qps <= found.capacity_qps


def test_a_filter_missed_even_at_zero_load_prunes_without_a_simulation(prepared, workload):
    impossible = LatencySLO("tbt", 99, 1e-4)
    result = find_capacity(prepared, workload, prune=PruneCheck(1.0, (impossible,)))
    assert result.pruned is not None and "zero load" in result.pruned
    assert result.num_simulations == 0 and math.isinf(result.failing_qps)


@pytest.mark.parametrize(
    "ttft_max_s,in_capacity", [(5.0, False), (3.5, False), (3.5, True)]
)  # fmt: skip
def test_the_pruned_job_recommends_what_the_complete_job_does(tmp_path, ttft_max_s, in_capacity):
    """With TTFT P90 < 5 s most configurations cannot beat the best; with 3.5 s none meets
    the filters at its capacity (Vidur's semantics), while with the filters in the capacity
    every served configuration meets them and most are held below the best."""
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
    slo = {"filters": filters, "max_rejected_share": 0.05, "capacity_meets_filters": in_capacity}
    both = {}
    for prune in (False, True):
        spec = write_spec(
            tmp_path, space=space, slo=slo, strategy={"kind": "grid", "prune": prune}
        )
        _, db, report = run_job(spec, f"sqlite:///{tmp_path / f'{prune}.db'}")
        frame = with_labels(db.results(report.job_id, status="done"))
        both[prune] = (report, frame, best_configuration(frame))
    (full, full_frame, full_best), (cut, cut_frame, cut_best) = both[False], both[True]
    assert not full.pruned and len(full_frame) == 12
    assert len(cut.pruned) >= 6 and cut.simulations < full.simulations
    assert len(cut_frame) + len(cut.pruned) == 12  # the pruned have no result
    # the others were searched as the complete job searched them
    cols = ["label", "tolerance", "capacity_qps", "slo_passed"]
    same = cut_frame[cols].merge(full_frame[cols], on=["label", "tolerance"])
    assert len(same) >= len(cut_frame) - 2  # the complete job may have refined a few more
    assert (same["capacity_qps_x"] == same["capacity_qps_y"]).all()
    assert (same["slo_passed_x"] == same["slo_passed_y"]).all()
    # what was pruned is, in the complete job, not recommendable or below the best
    full_rows = full_frame.set_index("label")
    floor = 0.0 if full_best is None else full_best["qps_per_dollar"]
    for entry in cut.pruned:
        row = full_rows.loc[entry.split(": ")[0]]
        assert not row["slo_passed"] or row["qps_per_dollar"] < floor, entry
    if ttft_max_s == 5.0 or in_capacity:
        assert cut_best is not None
        assert cut_best["params"] == full_best["params"]
        assert cut_best["qps_per_dollar"] == pytest.approx(full_best["qps_per_dollar"], rel=0.02)
    else:
        assert full_best is None and cut_best is None


@pytest.mark.parametrize("metric,percentile,max_s", [("ttft", 90, 0.5), ("tbt", 99, 0.05)])
def test_the_zero_load_headroom_is_what_the_zero_load_bound_leaves(
    prepared, workload, metric, percentile, max_s
):
    least = zero_load_percentile(prepared, workload, metric, percentile)
    headroom = zero_load_headroom(prepared, workload, [(metric, percentile, max_s)])
    assert 0 < headroom < 1
    assert headroom == pytest.approx(1 - least / max_s, rel=1e-9)
    both = [(metric, percentile, max_s), (metric, percentile, least / 2)]  # missed alone
    assert zero_load_headroom(prepared, workload, both) == 0.0
    assert zero_load_headroom(prepared, workload, [("e2e", 99, 1.0)]) == 1.0


def test_a_complete_job_starts_each_search_at_its_neighbours_capacity(tmp_path, monkeypatch):
    import search._driver as driver_module

    space = {
        "tp": [1],
        "schedulers": {"sarathi": {"batch_size": [32, 64, 128], "chunk_size": [512, 1024]}},
    }
    hints: list[float | None] = []
    real = driver_module.evaluate

    def recording(task):
        hints.append(task.hint_qps)
        return real(task)

    monkeypatch.setattr(driver_module, "evaluate", recording)
    spec = write_spec(tmp_path, space=space, capacity={"tolerance": 0.05, "refine_tolerance": None})
    _, db, warm = run_job(spec, f"sqlite:///{tmp_path / 'warm.db'}")
    # the first configuration of each SKU has no finished neighbour; every later one has
    assert hints.count(None) == 2 and len(hints) == 12
    monkeypatch.setattr(driver_module, "_neighbour_capacity", lambda *args: None)
    _, db_cold, cold = run_job(spec, f"sqlite:///{tmp_path / 'cold.db'}")
    assert warm.simulations < cold.simulations
    cols = ["fingerprint", "capacity_qps", "capacity_upper_qps"]
    both = db.results(warm.job_id)[cols].merge(db_cold.results(cold.job_id)[cols], on="fingerprint")
    assert len(both) == 12
    # each search brackets the same capacity: the brackets overlap
    assert (both["capacity_qps_x"] < both["capacity_upper_qps_y"]).all()
    assert (both["capacity_qps_y"] < both["capacity_upper_qps_x"]).all()
