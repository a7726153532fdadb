"""An engine's HTTP frontend tokenizes each prompt, one request at a time, before the
replica's scheduler sees it: the time is on the request's TTFT and prompts sent together
queue for it.  Its per-request latency (the request's way in, the first token's way out)
is on every TTFT too, but holds no tokenizer."""

from __future__ import annotations

import pytest

from estimators import load_engine, load_model
from simulator import ClusterConfig, Deployment, SchedulerConfig, Simulation, prepare
from sku_catalog import load_catalog
from tests.simulator.conftest import LinearEstimator, make_workload
from tests.simulator.test_invariants import check_conservation

PER_TOKEN = 3e-6  # seconds a prompt token


def _run(
    workload,
    per_token: float,
    replicas: int = 1,
    estimator: LinearEstimator | None = None,
    latency: float = 0.0,
) -> Simulation:
    cluster = ClusterConfig(
        num_replicas=replicas, num_kv_blocks=4000, tokenize_seconds_per_token=per_token,
        frontend_latency=latency,
    )  # fmt: skip
    sim = Simulation(
        workload,
        estimator or LinearEstimator(),
        SchedulerConfig(batch_size=16, chunk_size=4096),
        cluster,
    ).run()
    if estimator is None:  # batches that take no time give tokens no order to check
        check_conservation(sim)
    return sim


def test_a_lone_request_reaches_the_scheduler_after_its_prompt_is_tokenized():
    w = make_workload([2000], [4], [0.5])
    plain, tokenized = _run(w, 0.0).requests[0], _run(w, PER_TOKEN).requests[0]
    delay = 2000 * PER_TOKEN
    assert tokenized.arrival == plain.arrival == 0.5  # the client's send time
    assert tokenized.scheduled_at == pytest.approx(plain.scheduled_at + delay, abs=1e-12)
    assert tokenized.first_token_at - tokenized.arrival == pytest.approx(
        plain.first_token_at - plain.arrival + delay, abs=1e-12
    )


def test_prompts_sent_together_queue_for_one_replicas_tokenizer_in_turn():
    """Batches that take no time: each request is scheduled the moment its prompt is
    tokenized, after the prompts sent before it."""
    instant = LinearEstimator(base=0.0, per_token=0.0, per_kv=0.0, per_pair=0.0, overhead=0.0)
    sim = _run(make_workload([1000, 3000, 2000], [2, 2, 2]), PER_TOKEN, estimator=instant)
    ready = [1000 * PER_TOKEN, 4000 * PER_TOKEN, 6000 * PER_TOKEN]
    for req, t in zip(sim.requests, ready, strict=True):
        assert req.scheduled_at == pytest.approx(t, abs=1e-12)


def test_each_replica_tokenizes_its_own_requests():
    """Two replicas, two prompts sent together: neither waits for the other's tokenizer."""
    w = make_workload([3000, 3000], [2, 2])
    sim = _run(w, PER_TOKEN, replicas=2)
    assert {r.replica for r in sim.requests} == {0, 1}
    for req in sim.requests:
        assert req.scheduled_at == pytest.approx(3000 * PER_TOKEN, abs=1e-12)


def test_the_frontend_latency_delays_each_request_without_holding_the_tokenizer():
    """Prompts sent together: each reaches the scheduler after its turn at the tokenizer
    plus the latency, once; with no tokenizing at all, the latency alone."""
    instant = LinearEstimator(base=0.0, per_token=0.0, per_kv=0.0, per_pair=0.0, overhead=0.0)
    latency = 0.0087
    w = make_workload([1000, 3000, 2000], [2, 2, 2])
    sim = _run(w, PER_TOKEN, estimator=instant, latency=latency)
    for req, tokenized in zip(sim.requests, [1000, 4000, 6000], strict=True):
        assert req.scheduled_at == pytest.approx(tokenized * PER_TOKEN + latency, abs=1e-12)
    alone = _run(make_workload([2000], [4], [0.5]), 0.0, latency=latency).requests[0]
    plain = _run(make_workload([2000], [4], [0.5]), 0.0).requests[0]
    assert alone.arrival == plain.arrival == 0.5
    assert alone.first_token_at == pytest.approx(plain.first_token_at + latency, abs=1e-12)


def test_serving_engines_tokenize_in_their_frontend_and_vidur_does_not():
    sku = load_catalog().get("h100-sxm")
    model = load_model("meta-llama/Llama-3.1-8B")
    for name, expected in (("vllm", 3.0e-6), ("sglang", 3.0e-6), ("trtllm", 3.0e-6),
                           ("vidur", 0.0)):  # fmt: skip
        d = Deployment(model=model, sku=sku, tp=1, scheduler=SchedulerConfig(),
                       engine=load_engine(name))  # fmt: skip
        per_token = prepare(d).cluster.tokenize_seconds_per_token
        assert per_token == pytest.approx(expected, rel=1e-12), name


def test_only_vllm_has_a_measured_frontend_latency():
    """engines.yaml header: vLLM's from a public client-against-server measurement; the
    other engines have none, and Vidur's simulator starts at the scheduler."""
    sku = load_catalog().get("h100-sxm")
    model = load_model("meta-llama/Llama-3.1-8B")
    for name, expected in (("vllm", 8.7e-3), ("sglang", 0.0), ("trtllm", 0.0), ("vidur", 0.0)):
        d = Deployment(model=model, sku=sku, tp=1, scheduler=SchedulerConfig(),
                       engine=load_engine(name))  # fmt: skip
        latency = prepare(d).cluster.frontend_latency
        assert latency == pytest.approx(expected, rel=1e-12), name


def test_a_malformed_frontend_entry_is_refused_with_its_field():
    from estimators._engines import _frontend

    with pytest.raises(ValueError, match=r"tokenize_us_per_token -1.0 is negative"):
        _frontend({"tokenize_us_per_token": -1})
    with pytest.raises(ValueError, match=r"request_ms -2.0 is negative"):
        _frontend({"tokenize_us_per_token": 1, "request_ms": -2})
    with pytest.raises(ValueError, match="unknown keys"):
        _frontend({"tokenize_us_per_token": 1, "workers": 2})
