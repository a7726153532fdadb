"""The memory planner and the parallelism checks."""

from __future__ import annotations

import pytest

from estimators import (
    DoesNotFitError,
    MemoryPlan,
    ParallelismError,
    Precision,
    check_fits,
    plan_memory,
    validate_parallelism,
)
from estimators._memory import GIB, select_node
from estimators._types import ModelArchitecture
from sku_catalog._types import LinkKind, NodeShape
from tests.estimators.shapes import LLAMA7B, LLAMA70B, make_sku

MIB = 1 << 20


A100 = make_sku()


def test_llama2_7b_on_a100_80gb() -> None:
    plan = plan_memory(LLAMA7B, A100)
    assert isinstance(plan, MemoryPlan)
    assert plan.weights_bytes == pytest.approx(13.48e9, rel=0.01)  # 6.74 B params in bf16
    assert plan.kv_bytes_per_token == 0.5 * MIB  # 2 * 32 layers * 32 heads * 128 * 2 B
    assert plan.usable_bytes == pytest.approx(0.9 * 80e9)
    assert plan.reserve_bytes == GIB
    assert 0.2 * GIB < plan.activation_bytes < 2 * GIB
    expected_kv = plan.usable_bytes - plan.weights_bytes - plan.activation_bytes - GIB
    assert plan.kv_bytes == pytest.approx(expected_kv)
    assert plan.num_kv_blocks == int(expected_kv // (16 * 0.5 * MIB))
    assert plan.kv_capacity_tokens == 16 * plan.num_kv_blocks
    assert plan.fits
    assert 100_000 < plan.kv_capacity_tokens < 120_000
    assert check_fits(LLAMA7B, A100) == plan


def test_llama2_70b_does_not_fit_one_a100_80gb() -> None:
    plan = plan_memory(LLAMA70B, A100)
    assert not plan.fits
    assert plan.num_kv_blocks == 0 and plan.kv_capacity_tokens == 0
    assert plan.weights_bytes > 130e9
    with pytest.raises(DoesNotFitError) as err:
        check_fits(LLAMA70B, A100)
    msg = str(err.value)
    assert isinstance(err.value, ValueError)
    for word in ("DOES NOT FIT", "weights", "activations", "framework reserve", "GiB", "short by"):
        assert word in msg
    assert err.value.plan == plan


def test_llama2_70b_fits_with_tp4_and_gqa_kv_split() -> None:
    plan = check_fits(LLAMA70B, A100, tp=4)
    # 8 KV heads / 4 ranks = 2 per GPU: 2 * 80 * 2 * 128 * 2 B
    assert plan.kv_bytes_per_token == 2 * 80 * 2 * 128 * 2
    assert plan.weights_bytes == pytest.approx(138e9 / 4, rel=0.03)


def test_kv_heads_are_replicated_beyond_tp() -> None:
    # 8 KV heads at TP=8: one per GPU; a 4-KV-head model at TP=8: still one per GPU
    gqa4 = ModelArchitecture(
        name="gqa4",
        num_layers=32,
        hidden_size=4096,
        num_attention_heads=32,
        num_key_value_heads=4,
        intermediate_size=11008,
        vocab_size=32000,
    )
    assert plan_memory(LLAMA70B, A100, tp=8).kv_bytes_per_token == 2 * 80 * 1 * 128 * 2
    assert plan_memory(gqa4, A100, tp=8).kv_bytes_per_token == 2 * 32 * 1 * 128 * 2


def test_pipeline_stages_split_layers_and_kv() -> None:
    one = plan_memory(LLAMA7B, A100)
    two = plan_memory(LLAMA7B, A100, pp=2)
    assert two.kv_bytes_per_token == one.kv_bytes_per_token / 2
    emb = 32000 * 4096 * 2
    assert two.weights_bytes == pytest.approx((one.weights_bytes - 2 * emb) / 2 + emb, rel=1e-3)


def test_fp8_weights_and_kv() -> None:
    bf16 = plan_memory(LLAMA7B, A100)
    fp8 = plan_memory(LLAMA7B, A100, precision=Precision.FP8)
    assert fp8.weights_bytes < 0.55 * bf16.weights_bytes  # embeddings stay 16-bit
    assert fp8.kv_precision is Precision.BF16  # as vLLM's "auto": KV stays 16-bit unless asked
    assert fp8.kv_bytes_per_token == bf16.kv_bytes_per_token
    fp8_kv = plan_memory(LLAMA7B, A100, precision=Precision.FP8, kv_precision=Precision.FP8)
    assert fp8_kv.kv_bytes_per_token == bf16.kv_bytes_per_token / 2


def test_knobs_move_the_kv_budget() -> None:
    base = plan_memory(LLAMA7B, A100)
    assert plan_memory(LLAMA7B, A100, gpu_memory_utilization=0.8).kv_bytes < base.kv_bytes
    more_tokens = plan_memory(LLAMA7B, A100, max_num_batched_tokens=16384)
    assert more_tokens.activation_bytes > base.activation_bytes
    assert plan_memory(LLAMA7B, A100, block_size=32).num_kv_blocks == base.kv_bytes // (
        32 * base.kv_bytes_per_token
    )
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        plan_memory(LLAMA7B, A100, gpu_memory_utilization=1.5)


def test_breakdown_lists_every_term_in_gib() -> None:
    text = plan_memory(LLAMA7B, A100).breakdown()
    for word in ("GPU memory", "usable", "weights", "activations", "framework reserve", "KV cache"):
        assert word in text
    assert "74.51 GiB" in text  # 80 GB of HBM
    assert "fits" in text


def test_tp_must_divide_heads_and_names_the_choices() -> None:
    with pytest.raises(ParallelismError) as err:
        validate_parallelism(LLAMA7B, 3, 1, A100)
    msg = str(err.value)
    assert "TP=3" in msg and "32 attention heads" in msg and "[1, 2, 4, 8]" in msg


def test_tp_and_kv_heads() -> None:
    kv6 = ModelArchitecture(
        name="kv6",
        num_layers=24,
        hidden_size=6144,
        num_attention_heads=48,
        num_key_value_heads=6,
        intermediate_size=16384,
        vocab_size=32000,
    )
    with pytest.raises(ParallelismError, match="6 KV heads"):
        validate_parallelism(kv6, 4, 1, A100)
    validate_parallelism(kv6, 6, 1, A100)  # divides both
    kv3 = ModelArchitecture(
        name="kv3",
        num_layers=24,
        hidden_size=3072,
        num_attention_heads=24,
        num_key_value_heads=3,
        intermediate_size=8192,
        vocab_size=32000,
    )
    with pytest.raises(ParallelismError, match="not a multiple"):
        validate_parallelism(kv3, 8, 1, A100)
    validate_parallelism(kv3, 6, 1, A100)  # 6 % 3 == 0: KV heads replicated twice
    validate_parallelism(LLAMA70B, 8, 1, A100)


def test_pp_must_divide_layers() -> None:
    with pytest.raises(ParallelismError) as err:
        validate_parallelism(LLAMA7B, 1, 3, A100)
    assert "PP=3" in str(err.value) and "[1, 2, 4, 8, 16, 32]" in str(err.value)


def test_tp_stays_inside_a_node() -> None:
    four = make_sku(nodes=(NodeShape(4, LinkKind.NVLINK_PAIRWISE, 56.25, 3.125),))
    with pytest.raises(ParallelismError, match="exceeds the 4 GPUs"):
        validate_parallelism(LLAMA7B, 8, 1, four)
    validate_parallelism(LLAMA7B, 4, 4, four)  # pipeline stages may cross nodes
    with pytest.raises(ParallelismError, match="integer >= 1"):
        validate_parallelism(LLAMA7B, 0, 1, A100)


def test_node_shape_is_picked_by_gpu_count() -> None:
    shapes = tuple(NodeShape(n, LinkKind.PCIE, 32.0, 2.5) for n in (1, 4, 8))
    sku = make_sku("l40s", "ada", mem_gb=48, nodes=shapes)
    assert select_node(sku, 1).gpus_per_node == 1
    assert select_node(sku, 2).gpus_per_node == 4
    assert select_node(sku, 4, 2).gpus_per_node == 8
    assert select_node(sku, 8, 2).gpus_per_node == 8  # PP crosses nodes
    validate_parallelism(LLAMA7B, 8, 1, sku)  # the 8-GPU shape holds TP=8
    with pytest.raises(ParallelismError):
        select_node(sku, 16)


def test_an_engine_fraction_that_leaves_no_memory_names_what_to_give() -> None:
    """SGLang's own mem_fraction_static shrinks as its token budget grows (its reserve is
    1.5 MiB a budget token): at a 163,840-token chunk on an H200 it is negative, so the plan
    says so, naming the engine, the budget and the two ways out, rather than a bare range
    error; the fraction the launch gives is taken as it stands."""
    from estimators import MemoryFractionError, load_engine, load_model
    from sku_catalog import load_catalog

    model, engine = load_model("deepseek-ai/DeepSeek-V3"), load_engine("sglang")
    h200 = load_catalog().get("h200")
    with pytest.raises(MemoryFractionError) as raised:
        check_fits(model, h200, 8, precision="fp8", engine=engine, max_num_batched_tokens=163840)
    message = str(raised.value)
    assert "mem_fraction_static" in message and "163,840" in message
    assert "--gpu-memory-utilization" in message and "--chunk-size" in message
    plan = check_fits(model, h200, 8, precision="fp8", engine=engine,
                      max_num_batched_tokens=163840, gpu_memory_utilization=0.75)  # fmt: skip
    assert plan.gpu_memory_utilization == 0.75 and plan.fits
