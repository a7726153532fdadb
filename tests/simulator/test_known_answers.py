"""A request alone on a replica: its latencies are exactly what the roofline estimator says."""

from __future__ import annotations

import pytest

from estimators import BatchShape, load_model
from simulator import SchedulerConfig, SchedulerKind
from simulator._deployment import Deployment, prepare
from sku_catalog import load_catalog
from tests.simulator.conftest import make_workload


@pytest.mark.parametrize(("tp", "pp"), [(1, 1), (2, 1), (2, 2)])
@pytest.mark.parametrize("kind", [SchedulerKind.VLLM, SchedulerKind.SARATHI])
def test_single_request_matches_the_estimator(tp, pp, kind):
    prompt, output = 400, 25
    deployment = Deployment(
        model=load_model("meta-llama/Llama-2-7b-hf"),
        sku=load_catalog().get("h100-sxm"),
        tp=tp,
        pp=pp,
        scheduler=SchedulerConfig(kind, chunk_size=512),
    )
    prepared = prepare(deployment)
    est = prepared.estimator

    def iteration_time(shape: BatchShape) -> float:
        cost = est.batch_cost(shape)
        return cost.cpu_overhead + sum(cost.stage_times) + (pp - 1) * cost.pp_hop_time

    prefill = iteration_time(BatchShape(prompt, 1, prompt * (prompt + 1) / 2, prompt, 0, 0))
    # decode step k reads the prompt and the k tokens generated before it
    decodes = [iteration_time(BatchShape(0, 0, 0.0, 0, 1, prompt + k)) for k in range(output - 1)]

    row = prepared.simulate(make_workload([prompt], [output])).requests.iloc[0]
    assert row.ttft == pytest.approx(prefill, rel=1e-12)
    assert row.tpot == pytest.approx(sum(decodes) / (output - 1), rel=1e-12)
    assert row.e2e == pytest.approx(prefill + sum(decodes), rel=1e-12)
