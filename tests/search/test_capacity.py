"""Capacity search of one configuration: bracketing, bisection, exact early stop."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators import load_model
from search._capacity import (
    CAPACITY_CEILING,
    CAPACITY_MEASURED,
    CapacitySearchOptions,
    LatencySLO,
    Probe,
    _Search,
    find_capacity,
    first_requests,
    late_limit,
    servable,
    throughput_upper_bound,
    unit_arrival_times,
)
from simulator import SchedulerConfig, SchedulerKind, service_bound, weighted_percentiles
from simulator._deployment import Deployment, PreparedDeployment, prepare
from sku_catalog import load_catalog
from workloads import Workload, build_workload, mean_rate

LLAMA_7B = "meta-llama/Llama-2-7b-hf"
N = 500


def _deployment(replicas: int = 1, **kwargs) -> PreparedDeployment:
    return prepare(
        Deployment(
            load_model(LLAMA_7B),
            load_catalog().get("a100-80gb"),
            num_replicas=replicas,
            scheduler=SchedulerConfig(SchedulerKind.SARATHI, batch_size=128, chunk_size=512),
            **kwargs,
        )
    )


def _chat(n: int = N, seed: int = 3, **kwargs) -> Workload:
    return build_workload(
        {"source": "chat"}, num_requests=n, qps=1.0, concurrency=None, seed=seed, **kwargs
    )


def _summary_at(prepared: PreparedDeployment, workload: Workload, qps: float) -> dict:
    scaled = workload.with_arrival_times(unit_arrival_times(workload) / qps)
    return prepared.simulate(scaled).summary


def _probe(
    prepared: PreparedDeployment, workload: Workload, options: CapacitySearchOptions, qps: float
) -> Probe:
    """One probe of the search at exactly `qps` (the search itself stays under its ceiling)."""
    search = _Search(prepared, workload, unit_arrival_times(workload), options)
    search.probe(qps)
    return search.probes[0]


@pytest.fixture(scope="module")
def prepared() -> PreparedDeployment:
    return _deployment()


@pytest.fixture(scope="module")
def workload() -> Workload:
    return _chat()


@pytest.fixture(scope="module")
def found(prepared, workload):
    return find_capacity(prepared, workload)


# --------------------------------------------------------------------------- SLO


def test_slo_reads_the_summary_and_labels_itself():
    slo = LatencySLO("scheduling_delay", 99, 5.0)
    summary = {"latency_s": {"scheduling_delay": {"p99": 4.99}}}
    assert slo.value(summary) == 4.99
    assert slo.passed(summary)
    assert not slo.passed({"latency_s": {"scheduling_delay": {"p99": 5.0}}})  # strictly under
    assert not slo.passed({"latency_s": {"scheduling_delay": {"p99": math.nan}}})
    assert slo.label() == "scheduling_delay_p99 < 5 s"
    with pytest.raises(ValueError, match="metric"):
        LatencySLO("latency", 99, 5.0)
    with pytest.raises(ValueError, match="percentile"):
        LatencySLO("ttft", 98, 5.0)
    with pytest.raises(ValueError, match="max_s"):
        LatencySLO("ttft", 99, 0.0)


@pytest.mark.parametrize("percentile", [50, 90, 95, 99])
def test_late_limit_is_exactly_where_the_percentile_crosses(percentile):
    """late_limit(n, p) late values put the inverted-CDF percentile at the bound; one fewer not."""
    bound = 5.0
    for n in [*range(1, 60), 99, 100, 101, 300, 2000, 2001]:
        limit = late_limit(n, percentile)
        for late in {limit - 1, limit} - {-1, n + 1}:
            values = np.concatenate((np.zeros(n - late), np.full(late, bound)))
            value = weighted_percentiles(values, None, (percentile,))[f"p{percentile}"]
            assert (value >= bound) == (late >= limit), (n, late, limit)


# --------------------------------------------------------------------------- the search


def test_capacity_meets_the_slo_and_a_rate_above_it_does_not(prepared, workload, found):
    options = CapacitySearchOptions()
    slo = options.slo
    assert found.capacity_qps > 0
    assert found.summary is not None and slo.passed(found.summary)
    again = _summary_at(prepared, workload, found.capacity_qps)
    assert slo.passed(again)
    assert slo.value(again) == pytest.approx(slo.value(found.summary))
    above = _summary_at(prepared, workload, found.capacity_qps * (1 + 2 * options.tolerance))
    assert not slo.passed(above)
    assert found.num_simulations == len(found.probes) <= options.max_simulations
    best = max((p for p in found.probes if p.passed), key=lambda p: p.qps)
    assert best.qps == found.capacity_qps
    assert best.slo_value == slo.value(found.summary)


@pytest.mark.parametrize("metric", ["scheduling_delay", "ttft", "tbt", "tpot", "e2e",
                                    "normalized_latency"])  # fmt: skip
def test_probe_value_is_the_summary_percentile(prepared, workload, found, metric):
    slo = LatencySLO(metric, 90, 1e6)  # always passes: the run goes to the end
    qps = 0.8 * found.capacity_qps
    probe = _probe(prepared, workload, CapacitySearchOptions(slo=slo), qps)
    assert probe.passed and not probe.stopped_early
    assert probe.slo_value == slo.value(_summary_at(prepared, workload, qps))


def test_capacity_is_under_the_analytic_bound(prepared, workload, found):
    bound = throughput_upper_bound(prepared, workload)
    assert found.upper_bound_qps == pytest.approx(bound)
    assert math.isfinite(bound)
    assert found.capacity_qps <= bound
    assert found.capacity_qps >= 0.5 * bound  # and the bound is tight enough to bracket
    steady = service_bound(prepared, workload).steady_qps
    assert steady <= bound


def test_saturated_throughput_stays_under_the_steady_bound(prepared, workload):
    """Far overloaded, the simulated completion rate never beats the analytic service rate."""
    steady = service_bound(prepared, workload).steady_qps
    summary = _summary_at(prepared, workload, 3 * steady)
    assert summary["requests"]["completed"] == N
    assert summary["throughput"]["requests_per_s"] <= steady


@pytest.mark.parametrize(
    "slo",
    [LatencySLO("scheduling_delay", 99, 5.0), LatencySLO("ttft", 90, 2.0),
     LatencySLO("tbt", 99, 0.05), LatencySLO("tpot", 90, 0.03)],
    ids=lambda s: s.label(),
)  # fmt: skip
def test_early_stop_gives_the_full_run_verdict(prepared, workload, found, slo):
    capacity = found.capacity_qps
    stopped = 0
    for share in (0.5, 0.9, 1.1, 1.6, 4.0):
        verdicts = []
        for early_stop in (True, False):
            options = CapacitySearchOptions(slo=slo, early_stop=early_stop)
            verdicts.append(_probe(prepared, workload, options, share * capacity))
        fast, full = verdicts
        assert fast.passed == full.passed, share
        assert not full.stopped_early
        if fast.stopped_early:
            stopped += 1
            assert not fast.passed
            assert fast.slo_value >= slo.max_s
            assert fast.iterations < full.iterations
        else:
            assert fast.slo_value == full.slo_value
    assert stopped >= 1


def test_probes_reuse_one_workload_scaled(prepared, workload, monkeypatch):
    seen: list[Workload] = []
    original = PreparedDeployment.simulation

    def recording(self, w, options=None):
        seen.append(w)
        return original(self, w, options)

    monkeypatch.setattr(PreparedDeployment, "simulation", recording)
    result = find_capacity(prepared, workload)
    assert len(seen) == result.num_simulations >= 3
    unit = unit_arrival_times(workload)
    for w, probe in zip(seen, result.probes, strict=True):
        assert w.prompt_tokens is workload.prompt_tokens
        assert w.output_tokens is workload.output_tokens
        np.testing.assert_allclose(w.arrival_times * probe.qps, unit, rtol=1e-12, atol=1e-9)
        assert mean_rate(w.arrival_times) == pytest.approx(probe.qps)
    # the caller's workload is left as it was
    assert mean_rate(workload.arrival_times) == pytest.approx(1.0, rel=0.2)


@pytest.mark.parametrize("tolerance", [0.02, 0.1])
def test_the_final_bracket_is_within_the_tolerance(prepared, workload, tolerance):
    result = find_capacity(prepared, workload, CapacitySearchOptions(tolerance=tolerance))
    cap = result.capacity_qps
    failing_above = [p.qps for p in result.probes if not p.passed and p.qps > cap]
    assert failing_above, "the search must have seen a failing rate above the capacity"
    assert min(failing_above) / cap - 1 <= tolerance + 1e-12
    assert result.num_simulations < CapacitySearchOptions().max_simulations


def test_max_simulations_caps_the_search(prepared, workload):
    result = find_capacity(prepared, workload, CapacitySearchOptions(max_simulations=2))
    assert result.num_simulations == 2
    assert result.capacity_qps in {0.0, *(p.qps for p in result.probes if p.passed)}


def test_a_hint_near_the_capacity_needs_few_simulations(prepared, workload, found):
    result = find_capacity(prepared, workload, hint_qps=found.capacity_qps)
    assert result.num_simulations <= 4
    assert result.capacity_qps == pytest.approx(found.capacity_qps, rel=0.1)


def test_closed_loop_and_burst_workloads_have_no_rate(prepared):
    closed = build_workload({"source": "chat"}, num_requests=50, qps=None, concurrency=4, seed=0)
    with pytest.raises(ValueError, match="closed loop"):
        find_capacity(prepared, closed)
    burst = build_workload(
        {"source": "chat", "arrival": "static"}, num_requests=50, qps=None, concurrency=None,
        seed=0,
    )  # fmt: skip
    with pytest.raises(ValueError, match="same instant"):
        find_capacity(prepared, burst)


def test_a_deployment_that_serves_nothing_has_capacity_zero():
    tiny = _deployment(gpu_memory_utilization=0.2)  # room for a few KV blocks only
    capacity_tokens = tiny.memory.kv_capacity_tokens
    n = 200
    rng = np.random.default_rng(0)
    too_long = Workload(
        "too-long",
        np.cumsum(rng.exponential(1.0, n)),
        np.full(n, capacity_tokens + 64),
        np.full(n, 16),
    )
    result = find_capacity(tiny, too_long)
    assert result.capacity_qps == 0.0
    assert result.summary is None
    assert throughput_upper_bound(tiny, too_long) == 0.0


def test_an_slo_no_rate_meets_gives_capacity_zero(prepared):
    workload = _chat(n=300)
    impossible = LatencySLO("ttft", 99, 0.001)  # a 1k-token prefill alone takes longer
    result = find_capacity(prepared, workload, CapacitySearchOptions(slo=impossible))
    assert result.capacity_qps == 0.0
    assert result.summary is None
    assert result.unmeetable is not None and not result.probes  # known at zero load


def test_more_replicas_serve_proportionally_more(workload, found):
    two = find_capacity(_deployment(replicas=2), workload)
    assert 1.6 <= two.capacity_qps / found.capacity_qps <= 2.5
    assert two.capacity_qps <= two.upper_bound_qps


def test_refining_a_bracket_only_bisects_inside_it(prepared, workload):
    coarse = find_capacity(prepared, workload, CapacitySearchOptions(tolerance=0.2))
    lo, hi = coarse.capacity_qps, coarse.failing_qps
    assert 0 < lo < hi < math.inf
    fine = find_capacity(
        prepared, workload, CapacitySearchOptions(tolerance=0.01), passing_qps=lo, failing_qps=hi
    )
    assert fine.probes and all(lo < p.qps < hi for p in fine.probes)  # lo is never re-run
    assert lo <= fine.capacity_qps < fine.failing_qps <= hi
    assert fine.failing_qps / fine.capacity_qps - 1 <= 0.01
    if fine.summary is None:  # nothing above lo passed: the coarse run's metrics stand
        assert fine.capacity_qps == lo


def test_an_also_slo_stops_a_run_early_with_the_full_run_verdict(prepared, workload, found):
    ttft = LatencySLO("ttft", 90, 0.5)  # missed well below the delay capacity
    verdicts = []
    for early_stop in (True, False):
        options = CapacitySearchOptions(also=(ttft,), early_stop=early_stop)
        verdicts.append(_probe(prepared, workload, options, 0.9 * found.capacity_qps))
    fast, full = verdicts
    assert not fast.passed and not full.passed
    assert fast.stopped_early and not full.stopped_early
    assert fast.iterations < full.iterations
    assert fast.slo_value >= ttft.max_s  # the value of the SLO that stopped it


# --------------------------------------------------------------------------- measured or ceiling


@pytest.fixture(scope="module")
def fast() -> PreparedDeployment:
    """A deployment a few dozen chat requests cannot load (H100, large batches)."""
    return prepare(
        Deployment(
            load_model(LLAMA_7B),
            load_catalog().get("h100-sxm"),
            scheduler=SchedulerConfig(SchedulerKind.SARATHI, batch_size=256, chunk_size=1024),
        )
    )


@pytest.fixture(scope="module")
def long_chat() -> Workload:
    return _chat(800, seed=0)


def test_a_short_workload_passes_at_the_ceiling_and_is_flagged(fast, long_chat) -> None:
    short = first_requests(long_chat, 25)
    found = find_capacity(fast, short)
    assert found.capacity_kind == CAPACITY_CEILING and found.capacity_qps > 0
    assert math.isinf(found.failing_qps) and found.probes[-1].passed
    assert found.num_requests == 25 and all(p.num_requests == 25 for p in found.probes)


def test_the_search_lengthens_a_workload_too_short_to_load_the_deployment(fast, long_chat) -> None:
    found = find_capacity(fast, long_chat, num_requests=25)
    assert found.capacity_kind == CAPACITY_MEASURED
    assert 25 < found.num_requests <= len(long_chat)
    lengths = [p.num_requests for p in found.probes]
    assert lengths == sorted(lengths) and lengths[0] == 25  # doubled until a rate failed
    assert set(lengths) <= {25 * 2**k for k in range(6)}
    decided = [p for p in found.probes if p.num_requests == found.num_requests]
    assert any(not p.passed for p in decided) and found.failing_qps < math.inf
    assert found.num_simulations == len(found.probes)
    # the decided length searched on its own finds about the same (other probes, same SLO)
    again = find_capacity(fast, first_requests(long_chat, found.num_requests))
    assert again.capacity_kind == CAPACITY_MEASURED
    assert abs(again.capacity_qps / found.capacity_qps - 1) <= 0.1


def test_lengthening_stops_at_the_workload_it_has(fast, long_chat) -> None:
    found = find_capacity(fast, first_requests(long_chat, 50), num_requests=25)
    assert found.capacity_kind == CAPACITY_CEILING and found.num_requests == 50


def test_lengthening_shares_the_probe_budget(fast, long_chat) -> None:
    options = CapacitySearchOptions(max_simulations=3)
    found = find_capacity(fast, long_chat, options, num_requests=25)
    assert found.num_simulations <= 3


def test_a_workload_that_loads_the_deployment_is_not_lengthened(prepared, workload) -> None:
    longer = _chat(2 * N)
    assert first_requests(longer, N).prompt_tokens.tolist() == workload.prompt_tokens.tolist()
    found = find_capacity(prepared, longer, num_requests=N)
    assert found.capacity_kind == CAPACITY_MEASURED and found.num_requests == N
    assert {p.num_requests for p in found.probes} == {N}


def test_rejected_requests_are_counted_as_the_simulator_counts_them() -> None:
    vllm = SchedulerConfig(SchedulerKind.VLLM, batch_size=128, max_tokens=1024)
    prepared = prepare(
        Deployment(load_model(LLAMA_7B), load_catalog().get("a100-80gb"), scheduler=vllm)
    )
    workload = _chat(300, seed=1)
    never = int((~servable(prepared, workload)).sum())
    assert never > 0  # chat prompts over 1024 tokens
    found = find_capacity(prepared, workload)
    assert found.rejected_requests == never and found.num_requests == 300
    assert found.summary is not None and found.summary["requests"]["rejected"] == never


def test_with_prefix_caching_the_bound_rises_and_still_bounds_the_run():
    """A 2,048-token system prompt before every chat prompt: the analytic service rate
    counts only the tokens an unbounded cache would not hold, so it rises with caching on,
    and the simulated saturated throughput stays under it."""
    prompted = build_workload(
        {"source": "chat", "shared_prefix_tokens": 2048}, num_requests=N, qps=1.0,
        concurrency=None, seed=3,
    )  # fmt: skip
    on, off = _deployment(), _deployment(prefix_cache=False)
    steady_on = service_bound(on, prompted).steady_qps
    steady_off = service_bound(off, prompted).steady_qps
    assert steady_on > 1.3 * steady_off
    for prepared, steady in ((on, steady_on), (off, steady_off)):
        summary = _summary_at(prepared, prompted, 3 * steady)
        assert summary["requests"]["completed"] == N
        assert summary["throughput"]["requests_per_s"] <= steady
    saturated_on = _summary_at(on, prompted, 3 * steady_on)
    assert saturated_on["prefix_cache"]["hit_rate"] > 0.5


def test_speculative_decoding_bounds_by_verify_steps_and_still_bounds_the_run():
    """A verify step emits E tokens a sequence on average: the bound counts (output - 1) / E
    steps, and the saturated run still completes under it."""
    from estimators import SpeculativeConfig

    workload = _chat(200)
    plain = service_bound(_deployment(), workload).steady_qps
    prepared = _deployment(speculative=SpeculativeConfig("eagle", 3, 0.7))
    steady = service_bound(prepared, workload).steady_qps
    assert steady > 1.2 * plain  # 2.53 tokens a step for a step a little dearer
    summary = _summary_at(prepared, workload, 3 * steady)
    assert summary["requests"]["completed"] == 200
    assert 0.7 * steady < summary["throughput"]["requests_per_s"] <= steady
