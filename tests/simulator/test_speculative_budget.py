"""Speculative decoding's share of an iteration: each running decode's verify step counts
k + 1 tokens against the token budget, and the drafter's pass over a prompt adds to its
prefill (so to TTFT)."""

from __future__ import annotations

import pytest

from estimators import BatchShape, SpeculativeConfig, SpeculativeEstimator, load_model
from simulator import (
    ClusterConfig,
    DecodeSpec,
    Deployment,
    SchedulerConfig,
    SchedulerKind,
    Simulation,
    prepare,
)
from sku_catalog import load_catalog
from tests.simulator.conftest import LinearEstimator, make_workload

CONFIG = SpeculativeConfig("draft", 3, 0.7, draft_model="a drafter")  # k = 3: 4 verify tokens
DRAFT = LinearEstimator(base=0.001)


def _sim(kind: SchedulerKind, decode_tokens: int, speculative: bool = True) -> Simulation:
    """8 short prompts that decode from t = 0, then a 1000-token prompt at t = 0.05."""
    workload = make_workload([16] * 8 + [1000], [400] * 8 + [5], [0.0] * 8 + [0.05])
    target = LinearEstimator()
    estimator = SpeculativeEstimator(target, CONFIG, DRAFT) if speculative else target
    scheduler = SchedulerConfig(kind, batch_size=64, chunk_size=256, max_tokens=256,
                                decode_tokens=decode_tokens)  # fmt: skip
    return Simulation(workload, estimator, scheduler, ClusterConfig(num_kv_blocks=10_000)).run()


def _first_batch_with_the_long_prompt(sim: Simulation) -> tuple[int, int]:
    cols = sim.batches.columns()
    for start, tokens, decodes in zip(
        cols["start"], cols["prefill_tokens"], cols["num_decodes"], strict=True
    ):
        if start >= 0.05 and tokens > 0:
            return int(tokens), int(decodes)
    raise AssertionError("the long prompt never ran")


def test_eight_speculative_decodes_at_k3_leave_256_minus_32_prefill_tokens():
    assert _first_batch_with_the_long_prompt(_sim(SchedulerKind.SARATHI, 4)) == (224, 8)
    # one token a decode (no speculation): 256 - 8
    plain = _sim(SchedulerKind.SARATHI, 1, speculative=False)
    assert _first_batch_with_the_long_prompt(plain) == (248, 8)


def test_orca_counts_verify_tokens_against_its_token_limit():
    workload = make_workload([16] * 8 + [230], [400] * 8 + [5], [0.0] * 8 + [0.05])
    for decode_tokens, joins in ((1, True), (4, False)):  # 230 + 8 fits 256; 230 + 32 does not
        scheduler = SchedulerConfig(SchedulerKind.ORCA, batch_size=64, max_tokens=256,
                                    decode_tokens=decode_tokens)  # fmt: skip
        estimator = SpeculativeEstimator(LinearEstimator(), CONFIG, DRAFT)
        sim = Simulation(workload, estimator, scheduler, ClusterConfig(num_kv_blocks=10_000))
        cols = sim.run().batches.columns()
        mixed = (cols["prefill_tokens"] == 230) & (cols["num_decodes"] == 8)
        assert bool(mixed.any()) is joins


def test_a_speculative_deployment_runs_its_replicas_and_decode_pool_at_k_plus_1():
    sku = load_catalog().get("h100-sxm")
    model = load_model("meta-llama/Llama-3.1-8B")
    deployment = Deployment(
        model, sku, speculative=SpeculativeConfig("eagle", 3, 0.7),
        decode=DecodeSpec(sku),
    )  # fmt: skip
    workload = make_workload([100], [10])
    sim = prepare(deployment).simulation(workload)
    assert [r.policy.decode_tokens for r in sim.replicas] == [4, 4]  # prefill and decode pool
    plain = prepare(Deployment(model, sku)).simulation(workload)
    assert plain.replicas[0].policy.decode_tokens == 1


def test_ttft_rises_by_the_drafters_prefill_of_the_prompt():
    workload = make_workload([300], [50])
    scheduler = SchedulerConfig(SchedulerKind.SARATHI, batch_size=64, chunk_size=512)
    runs = [
        Simulation(workload, estimator, scheduler, ClusterConfig(num_kv_blocks=10_000)).run()
        for estimator in (LinearEstimator(), SpeculativeEstimator(LinearEstimator(), CONFIG, DRAFT))
    ]
    plain, spec = (sim.requests[0].first_token_at for sim in runs)
    prompt = BatchShape(num_prefill_tokens=300, num_prefills=1,
                        prefill_attn_pairs=300 * 301 / 2, prefill_kv_tokens=300)  # fmt: skip
    draft_prefill = DRAFT.stage_time(prompt)  # 0.001 + 2e-5 x 300 + 1e-9 x 45150
    assert draft_prefill == pytest.approx(0.00704515)
    assert spec - plain == pytest.approx(draft_prefill, rel=1e-12)
