"""The capacity search of a pipeline-parallel configuration, with its early stops and the
Vidur-paper filters (TTFT P90, TBT P99), finds the same capacity from the same probes
whether a pipeline replica handles its decode-only events at once
(`Replica._run_pipeline_decodes`) or hands each to the event loop and the policy."""

from __future__ import annotations

import math

import pytest

from estimators import load_model
from search._capacity import CapacitySearchOptions, LatencySLO, find_capacity
from simulator import SchedulerConfig, SchedulerKind
from simulator._deployment import Deployment, prepare
from simulator._replica import Replica
from sku_catalog import load_catalog
from workloads import build_workload

FILTERS = (LatencySLO("ttft", 90, 2.0), LatencySLO("tbt", 99, 0.2))


def _without_wall_times(value):
    if isinstance(value, dict):
        return {k: _without_wall_times(v) for k, v in value.items() if "wall" not in k}
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


@pytest.mark.parametrize(("kind", "pp"), [(SchedulerKind.ORCA, 2), (SchedulerKind.SARATHI, 4)])
def test_pipeline_capacity_search_is_the_same_either_way(monkeypatch, kind, pp):
    prepared = prepare(
        Deployment(
            load_model("meta-llama/Llama-2-7b-hf"), load_catalog().get("a100-80gb"), pp=pp,
            scheduler=SchedulerConfig(kind, batch_size=64, chunk_size=512),
        )
    )  # fmt: skip
    workload = build_workload(
        {"source": "chat"}, num_requests=400, qps=1.0, concurrency=None, seed=5
    )
    options = CapacitySearchOptions(also=FILTERS)
    fast = find_capacity(prepared, workload, options)
    monkeypatch.setattr(Replica, "_run_pipeline_decodes", lambda self, now: False)
    slow = find_capacity(prepared, workload, options)

    def probes(result):
        return [(p.qps, p.passed, p.slo_value, p.stopped_early, p.iterations, p.kind)
                for p in result.probes]  # fmt: skip

    assert fast.capacity_qps == slow.capacity_qps > 0
    assert probes(fast) == probes(slow)
    assert _without_wall_times(fast.summary) == _without_wall_times(slow.summary)
    assert any(p.stopped_early for p in fast.probes)  # the hooks stopped some probes
