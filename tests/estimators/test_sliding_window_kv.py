"""The KV cache of sliding-window layers under each engine's layout (estimators/_memory.py
`kv_cache_layout`, engines.yaml `sliding_window_kv`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from estimators import Precision, load_model
from estimators._engines import load_engine
from estimators._memory import kv_bytes_per_token_per_gpu, kv_cache_layout, plan_memory
from sku_catalog import load_catalog

GPT_OSS_20B = "openai/gpt-oss-20b"  # 24 layers, 12 of them slide over 128 keys


@pytest.fixture(scope="module")
def h100():
    return load_catalog().get("h100-sxm")


def _every_layer(model, tp=1):
    return kv_bytes_per_token_per_gpu(model, tp, 1, Precision.BF16)


def test_vllm_pages_hold_the_full_layers_tokens_and_a_window_per_request():
    model = load_model(GPT_OSS_20B)
    every = _every_layer(model)  # 24 layers x 8 KV heads x 64 x 2 (K, V) x 2 B
    assert every == 24 * 8 * 64 * 2 * 2
    per_token, window = kv_cache_layout(model, 1, 1, Precision.BF16, 16, load_engine("vllm"))
    assert per_token == every / 2  # the 12 full layers
    # pages of the last 127 tokens and the current one: ceil(127 / 16) + 1 = 9 pages of the
    # 12 sliding layers, as big as 9 blocks of the 12 full layers
    assert window == 9
    _, window_32 = kv_cache_layout(model, 1, 1, Precision.BF16, 32, load_engine("vllm"))
    assert window_32 == 5  # ceil(127 / 32) + 1


def test_sglang_window_pool_holds_a_share_of_the_full_pools_tokens():
    model = load_model(GPT_OSS_20B)
    engine = load_engine("sglang")
    assert engine.swa_full_tokens_ratio == 0.8
    per_token, window = kv_cache_layout(model, 1, 1, Precision.BF16, 16, engine)
    assert per_token == pytest.approx(_every_layer(model) * (0.5 + 0.8 * 0.5))
    assert window == 0


@pytest.mark.parametrize("engine", ["trtllm", None])
def test_engines_that_keep_every_key_count_every_layer(engine):
    model = load_model(GPT_OSS_20B)
    profile = load_engine(engine) if engine else None
    assert kv_cache_layout(model, 1, 1, Precision.BF16, 16, profile) == (_every_layer(model), 0)


def test_models_without_full_layers_or_without_sliding_ones_are_unchanged():
    vllm = load_engine("vllm")
    mistral = load_model("mistralai/Mistral-7B-v0.1")  # every layer slides: an upper bound
    llama = load_model("meta-llama/Llama-3.1-8B")
    for model in (mistral, llama):
        assert kv_cache_layout(model, 1, 1, Precision.BF16, 16, vllm) == (_every_layer(model), 0)


def test_the_memory_plan_counts_tokens_on_the_full_layers(h100):
    model = load_model(GPT_OSS_20B)
    vllm, trt = load_engine("vllm"), load_engine("trtllm")
    paged = plan_memory(model, h100, engine=vllm)
    unwindowed = plan_memory(model, h100, engine=replace(vllm, sliding_window_kv="full"))
    assert paged.kv_bytes == unwindowed.kv_bytes
    assert paged.window_kv_blocks == 9 and unwindowed.window_kv_blocks == 0
    assert paged.num_kv_blocks == 2 * unwindowed.num_kv_blocks or (
        abs(paged.num_kv_blocks - 2 * unwindowed.num_kv_blocks) <= 1
    )
    assert "9 blocks per running request" in paged.breakdown()
    assert plan_memory(model, h100, engine=trt).window_kv_blocks == 0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"sliding_window_kv": "windowed"}, "sliding_window_kv 'windowed' is not one of"),
        ({"sliding_window_kv": "pool", "swa_full_tokens_ratio": 1.5}, "not in (0, 1]"),
        ({"sliding_window_kv": "pool"}, "swa_full_tokens_ratio None is not in (0, 1]"),
        ({"sliding_window_kv": "paged", "swa_full_tokens_ratio": 0.5}, "is for sliding_window_kv"),
    ],
)
def test_malformed_layouts_name_the_field(body, message):
    from estimators._engines import _sliding_kv

    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("]", r"\]")):
        _sliding_kv(body.get("sliding_window_kv"), body.get("swa_full_tokens_ratio"))
