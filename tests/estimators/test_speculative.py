"""Speculative decoding: tokens per step, the price of a verify step, the drafter's memory,
the CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from estimators import (
    BatchShape,
    Precision,
    SpeculativeConfig,
    SpeculativeEstimator,
    drafter_memory,
    expected_tokens_per_step,
    load_engine,
    load_model,
    make_estimator,
    plan_memory,
)
from search.cli import cli
from sku_catalog import load_catalog


def test_tokens_per_step_is_the_expected_accepted_run_plus_one():
    assert expected_tokens_per_step(1, 0.0) == 1.0
    assert expected_tokens_per_step(3, 1.0) == 4.0
    assert expected_tokens_per_step(3, 0.5) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert SpeculativeConfig("eagle", 3, 0.7).tokens_per_step == pytest.approx(2.533)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"acceptance_rate": 1.5}, "acceptance_rate 1.5: must be within"),
        ({"num_speculative_tokens": 0}, "at least 1 proposal"),
        ({"method": "draft"}, "needs draft_model"),
        ({"method": "medusa"}, "one of mtp, eagle, draft"),
    ],
)
def test_bad_settings_say_what_is_allowed(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SpeculativeConfig(**kwargs)


@pytest.fixture(scope="module")
def target():
    model = load_model("meta-llama/Llama-3.1-8B")
    return make_estimator("roofline", model, load_catalog().get("h100-sxm"), 1,
                          engine=load_engine("vllm"))  # fmt: skip


def _ratio(target, config, n, kv=2048):
    """A verify step's price per token it emits on average (E), against a decode step's."""
    batch = BatchShape(num_decodes=n, decode_kv_tokens=n * kv)
    spec = SpeculativeEstimator(target, config).batch_cost(batch).stage_times[0]
    return spec / config.tokens_per_step / target.batch_cost(batch).stage_times[0]


def test_a_verify_step_is_priced_whole_whatever_is_accepted(target):
    batch = BatchShape(num_decodes=8, decode_kv_tokens=8 * 2048)
    none = SpeculativeEstimator(target, SpeculativeConfig("eagle", 3, 0.0)).batch_cost(batch)
    most = SpeculativeEstimator(target, SpeculativeConfig("eagle", 3, 0.9)).batch_cost(batch)
    assert none == most  # what a step emits is drawn by the simulator, not priced here


def test_a_token_costs_more_when_nothing_is_accepted_and_less_when_most_is(target):
    assert _ratio(target, SpeculativeConfig("eagle", 3, 0.0), 8) > 1.1  # verify 4 + draft 3
    assert _ratio(target, SpeculativeConfig("eagle", 3, 0.9), 8) < 0.5
    # a decode step is bound by reading the weights: verifying 4 tokens a sequence costs
    # little more at small batches; at large ones the GEMMs grow with the tokens
    small = _ratio(target, SpeculativeConfig("eagle", 3, 0.7), 4, kv=512)
    large = _ratio(target, SpeculativeConfig("eagle", 3, 0.7), 256, kv=512)
    assert small < 0.5 < large


PROMPT = BatchShape(num_prefill_tokens=512, num_prefills=1, prefill_attn_pairs=512 * 513 / 2,
                    prefill_kv_tokens=512)  # fmt: skip


def test_a_prompt_chunk_adds_one_mtp_layer_over_its_tokens_per_draft_layer(target):
    one = SpeculativeEstimator(target, SpeculativeConfig("mtp", 2, 0.8)).batch_cost(PROMPT)
    two = SpeculativeEstimator(target, SpeculativeConfig("mtp", 2, 0.8, draft_layers=2))
    plain = target.batch_cost(PROMPT)
    ops = target.operator_times(PROMPT)
    layer = sum(t for name, t in ops.items() if name not in ("emb", "send_recv"))
    assert layer > 0
    # a second head layer costs one more target layer over the chunk's 512 tokens
    assert two.batch_cost(PROMPT).stage_times[0] - one.stage_times[0] == pytest.approx(layer)
    # one layer and the LM head: more than a layer, less than two (32 layers in the model)
    assert layer < one.stage_times[0] - plain.stage_times[0] < 2 * layer
    assert one.cpu_overhead == plain.cpu_overhead  # inside the engine's step
    assert one.flops > plain.flops
    assert SpeculativeEstimator(target, SpeculativeConfig("mtp", 2, 0.8)).layers_per_stage == (
        target.layers_per_stage
    )  # the target's attributes


def test_a_draft_model_prefills_the_chunk_beside_the_target(target):
    sku = load_catalog().get("h100-sxm")
    big = make_estimator("roofline", load_model("meta-llama/Llama-3.1-70B"), sku, 4,
                         engine=load_engine("vllm"))  # fmt: skip
    config = SpeculativeConfig("draft", 4, 0.0, draft_model="meta-llama/Llama-3.1-8B")
    cost = SpeculativeEstimator(big, config, draft=target).batch_cost(PROMPT)
    draft = target.batch_cost(PROMPT)
    assert cost.stage_times[0] == pytest.approx(
        big.batch_cost(PROMPT).stage_times[0] + draft.stage_times[0], rel=1e-12
    )
    assert cost.flops == pytest.approx(big.batch_cost(PROMPT).flops + draft.flops, rel=1e-12)


def test_a_draft_model_prices_its_own_steps(target):
    sku = load_catalog().get("h100-sxm")
    big = make_estimator("roofline", load_model("meta-llama/Llama-3.1-70B"), sku, 4,
                         engine=load_engine("vllm"))  # fmt: skip
    config = SpeculativeConfig("draft", 4, 0.0, draft_model="meta-llama/Llama-3.1-8B")
    batch = BatchShape(num_decodes=8, decode_kv_tokens=8 * 1024)
    with_draft = SpeculativeEstimator(big, config, draft=target).batch_cost(batch)
    drafts = 4 * target.batch_cost(batch).stage_times[0]  # 4 steps of the 8B (its CPU too)
    assert with_draft.stage_times[0] > drafts * 0.9


def _simulate(*args: str) -> dict:
    result = CliRunner().invoke(cli, [
        "simulate", "--model", "meta-llama/Llama-3.1-8B", "--sku", "h100-sxm",
        "--concurrency", "8", "--num-requests", "64", "--json", *args,
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_simulate_with_eagle_emits_tokens_faster():
    plain = _simulate()
    eagle = _simulate("--speculative", "eagle", "--num-speculative-tokens", "3",
                      "--acceptance-rate", "0.7")  # fmt: skip
    ratio = eagle["latency_s"]["tpot"]["p50"] / plain["latency_s"]["tpot"]["p50"]
    assert 0.4 < ratio < 0.7  # 2.5 tokens a step, each step a little dearer
    draft = _simulate("--speculative", "draft", "--draft-model", "meta-llama/Llama-2-7b-hf",
                      "--num-speculative-tokens", "2", "--acceptance-rate", "0.1")  # fmt: skip
    assert draft["latency_s"]["tpot"]["p50"] > plain["latency_s"]["tpot"]["p50"]


def test_an_acceptance_rate_outside_0_1_exits_2_naming_the_field():
    result = CliRunner().invoke(cli, [
        "simulate", "--speculative", "mtp", "--acceptance-rate", "1.5", "--qps", "1",
    ])  # fmt: skip
    assert result.exit_code == 2
    assert "speculative.acceptance_rate" in result.output and "Traceback" not in result.output


def _plans(config: SpeculativeConfig, draft=None, model="meta-llama/Llama-3.1-8B", tp=1):
    target = load_model(model)
    sku = load_catalog().get("h100-sxm")
    drafter = drafter_memory(config, target, draft, tp, Precision.BF16, Precision.BF16)
    engine = load_engine("vllm")
    return (
        drafter,
        plan_memory(target, sku, tp, engine=engine),
        plan_memory(target, sku, tp, engine=engine, drafter=drafter),
    )


def test_the_memory_plan_counts_a_draft_models_weights_and_kv_exactly():
    config = SpeculativeConfig("draft", 4, 0.7, draft_model="meta-llama/Llama-3.1-8B")
    drafter, plain, spec = _plans(config, load_model("meta-llama/Llama-3.1-8B"),
                                  "meta-llama/Llama-3.1-70B", tp=4)  # fmt: skip
    # Llama-3.1-8B: 8,030,261,248 parameters; at TP4 every matrix and the (untied) embedding
    # and LM head split four ways, the norms (2 x 4096 per layer + 4096) on every GPU
    norms = 32 * 2 * 4096 + 4096
    assert drafter.weights_bytes == 2 * ((8_030_261_248 - norms) / 4 + norms)
    assert drafter.kv_bytes_per_token == 2 * 32 * (8 // 4) * 128 * 2  # K and V, 2 of 8 heads
    assert spec.kv_bytes_per_token == plain.kv_bytes_per_token + drafter.kv_bytes_per_token
    assert spec.kv_bytes == pytest.approx(plain.kv_bytes - drafter.weights_bytes, abs=1)
    assert spec.kv_capacity_tokens < plain.kv_capacity_tokens * 0.9
    assert "drafter weights" in spec.breakdown() and "meta-llama/Llama-3.1-8B" in spec.breakdown()


def test_an_eagle_head_is_one_layer_and_its_input_projection():
    drafter, plain, spec = _plans(SpeculativeConfig("eagle", 3, 0.7))
    layer = 4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336  # attention + MLP
    projection = 2 * 4096 * 4096  # [embedding; hidden] -> hidden
    assert drafter.weights_bytes == 2 * (layer + 2 * 4096 + projection)  # bf16, two norms
    assert drafter.kv_bytes_per_token == 2 * 8 * 128 * 2  # one layer's K and V
    assert drafter.label == "eagle head (1 layer)"
    assert spec.num_kv_blocks < plain.num_kv_blocks


def test_a_drafter_that_does_not_fit_is_named_in_the_error():
    result = CliRunner().invoke(cli, [
        "simulate", "--model", "meta-llama/Llama-3.1-70B", "--sku", "h100-sxm", "--tp", "2",
        "--speculative", "draft", "--draft-model", "meta-llama/Llama-3.1-8B", "--qps", "1",
    ])  # fmt: skip
    assert result.exit_code == 2
    assert "- drafter weights" in result.output
    assert "7.48 GiB (draft model meta-llama/Llama-3.1-8B)" in result.output  # 8B / TP2, bf16
    without = CliRunner().invoke(cli, [
        "simulate", "--model", "meta-llama/Llama-3.1-70B", "--sku", "h100-sxm", "--tp", "2",
        "--qps", "1", "--num-requests", "4",
    ])  # fmt: skip
    assert without.exit_code == 0, without.output  # the 70B alone fits


def test_acceptance_rates_out_of_range_or_of_the_wrong_length_exit_2_naming_the_field():
    for rates, says in (("0.9,1.2,0.5", "speculative.acceptance_rates.1"),
                        ("0.9,0.5", "acceptance_rates has 2 values")):  # fmt: skip
        result = CliRunner().invoke(cli, [
            "simulate", "--speculative", "eagle", "--num-speculative-tokens", "3",
            "--acceptance-rates", rates, "--qps", "1",
        ])  # fmt: skip
        assert result.exit_code == 2, result.output
        assert says in result.output and "Traceback" not in result.output
