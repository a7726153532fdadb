"""The decode pool's routing policy (`DecodePool.router`): which decode replica takes a request."""

from __future__ import annotations

import pytest

from estimators import DECODE_RESERVE_AT_HANDOFF, DECODE_RESERVE_AT_ROUTE
from simulator import (
    ClusterConfig,
    GlobalSchedulerKind,
    SchedulerConfig,
    SchedulerKind,
    Simulation,
    request_token_times,
)
from simulator._engine import DecodePool, Hardware
from tests.simulator.conftest import LinearEstimator, make_workload

LONG, SHORT = 300, 5  # output tokens: the first request decodes long after the second ends


def _run(router: GlobalSchedulerKind, reserve: str, arrivals: list[float]) -> Simulation:
    """Two decode replicas of batch cap 1; requests of 100-token prompts."""
    pool = DecodePool(
        LinearEstimator(), SchedulerConfig(SchedulerKind.SARATHI, batch_size=1, chunk_size=256),
        ClusterConfig(num_replicas=2, num_kv_blocks=400), Hardware(),
        transfer_seconds_per_token=1e-6, reserve=reserve, router=router,
    )  # fmt: skip
    outputs = [LONG, SHORT, SHORT][: len(arrivals)]
    return Simulation(
        make_workload([100] * len(arrivals), outputs, arrivals), LinearEstimator(),
        SchedulerConfig(SchedulerKind.SARATHI, batch_size=16, chunk_size=256),
        ClusterConfig(num_kv_blocks=400), decode_pool=pool,
    ).run()  # fmt: skip


@pytest.mark.parametrize("reserve", [DECODE_RESERVE_AT_HANDOFF, DECODE_RESERVE_AT_ROUTE])
def test_round_robin_queues_a_request_behind_a_busy_decoder_that_lor_avoids(reserve):
    """The long and a short request decode on the two replicas; a third arrives when the
    short one is done: least outstanding sends it to the idle replica, round-robin to the
    busy one, where it waits for the long request's last token (batch cap 1)."""
    two = _run(GlobalSchedulerKind.LEAST_OUTSTANDING, reserve, [0.0, 0.0])
    short_done, long_done = two.requests[1].completed_at, two.requests[0].completed_at
    assert short_done < long_done
    third = [0.0, 0.0, (short_done + long_done) / 2]
    lor = _run(GlobalSchedulerKind.LEAST_OUTSTANDING, reserve, third)
    rr = _run(GlobalSchedulerKind.ROUND_ROBIN, reserve, third)
    for sim in (lor, rr):
        assert sim.requests[0].replica != sim.requests[1].replica
        assert sim.requests[0].completed_at == pytest.approx(long_done)
    assert lor.requests[2].replica == lor.requests[1].replica  # the idle one
    assert lor.requests[2].completed_at < long_done
    assert rr.requests[2].replica == rr.requests[0].replica  # its turn: the busy one
    second_token = request_token_times(rr, 2)[1]
    assert second_token > rr.requests[0].completed_at  # decodes only after the long one ends
    rr_latency, lor_latency = (s.requests[2].completed_at - third[2] for s in (rr, lor))
    assert rr_latency > 10 * lor_latency


def test_random_routing_is_reproducible_and_reaches_every_decoder():
    runs = [
        _run(GlobalSchedulerKind.RANDOM, DECODE_RESERVE_AT_HANDOFF, [0.0, 0.0, 0.5 * i])
        for i in range(6)
    ]
    again = _run(GlobalSchedulerKind.RANDOM, DECODE_RESERVE_AT_HANDOFF, [0.0, 0.0, 0.0])
    assert [r.replica for r in again.requests] == [r.replica for r in runs[0].requests]
    assert {r.replica for sim in runs for r in sim.requests} == {1, 2}


def test_the_decode_spec_router_reaches_the_pool():
    from estimators import load_engine, load_model
    from simulator import DecodeSpec, Deployment, engine_scheduler, prepare
    from sku_catalog import load_catalog

    h100, engine = load_catalog().get("h100-sxm"), load_engine("trtllm")
    scheduler = engine_scheduler(engine, h100, 4)

    def pool(**router) -> DecodePool:
        decode = DecodeSpec(h100, tp=4, num_replicas=2, scheduler=scheduler, **router)
        d = Deployment(load_model("meta-llama/Llama-3.1-70B"), h100, tp=4, engine=engine,
                       scheduler=scheduler, decode=decode)  # fmt: skip
        return prepare(d).decode_pool

    assert pool().router is GlobalSchedulerKind.LEAST_OUTSTANDING  # llmcap's default
    assert pool(router=GlobalSchedulerKind.ROUND_ROBIN).router is GlobalSchedulerKind.ROUND_ROBIN
