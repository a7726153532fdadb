"""Sliding-window attention: read from config.json, priced over the window's keys."""

from __future__ import annotations

import itertools
import json
import pickle
from dataclasses import replace

import pytest

from estimators import BatchShape, ModelConfigError, Precision, load_model, make_estimator
from sku_catalog import load_catalog

WINDOW = 128


def _gpt_oss_config(**overrides):
    config = {
        "model_type": "gpt_oss", "hidden_size": 2880, "num_hidden_layers": 4,
        "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
        "intermediate_size": 2880, "num_local_experts": 32, "experts_per_token": 4,
        "vocab_size": 201088, "sliding_window": WINDOW,
        "layer_types": ["sliding_attention", "full_attention"] * 2,
    }  # fmt: skip
    return {**config, **overrides}


def _load(tmp_path, config):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return load_model(str(path))


def test_built_in_models_read_their_windows():
    for name, window, sliding, layers in (
        ("openai/gpt-oss-120b", 128, 18, 36),
        ("openai/gpt-oss-20b", 128, 12, 24),
        ("mistralai/Mistral-7B-v0.1", 4096, 32, 32),  # MistralConfig: every layer slides
    ):
        m = load_model(name)
        assert (m.sliding_window, m.sliding_window_layers, m.num_layers) == (
            window, sliding, layers
        )
    # Qwen3 configs carry a window they do not use
    assert load_model("Qwen/Qwen3-32B").sliding_window_layers == 0
    assert load_model("meta-llama/Llama-3.1-8B").sliding_window_layers == 0


def test_models_without_a_window_keep_their_fingerprints():
    m = load_model("meta-llama/Llama-3.1-8B")
    assert "sliding_window" not in m.fingerprint_fields()
    oss = load_model("openai/gpt-oss-20b").fingerprint_fields()
    assert (oss["sliding_window"], oss["sliding_window_layers"]) == (128, 12)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"layer_types": ["full_attention"] * 3}, "layer_types must list one attention kind"),
        (
            {"layer_types": ["linear_attention", "full_attention"] * 2},
            "layer_types holds 'linear_attention'",
        ),
        ({"sliding_window": None}, "sliding_attention layers but no sliding_window"),
        ({"sliding_window": 0}, "sliding_window=0: must be an integer >= 1"),
    ],
)
def test_a_window_the_estimator_cannot_price_names_the_field(tmp_path, overrides, message):
    with pytest.raises(ModelConfigError, match=message):
        _load(tmp_path, _gpt_oss_config(**overrides))


def _estimators(tmp_path):
    windowed = _load(tmp_path, _gpt_oss_config())
    full = replace(windowed, sliding_window=0, sliding_window_layers=0)
    sku = load_catalog().get("h200")
    return tuple(
        make_estimator("roofline", m, sku, precision=Precision.FP8, engine="vllm")
        for m in (windowed, full)
    )


def test_decodes_inside_the_window_cost_what_full_attention_does(tmp_path):
    windowed, full = _estimators(tmp_path)
    inside = BatchShape(num_decodes=8, decode_kv_tokens=8 * WINDOW)
    assert windowed.batch_cost(inside).stage_times == full.batch_cost(inside).stage_times


def test_sliding_layers_read_only_the_window_of_a_long_context(tmp_path):
    windowed, full = _estimators(tmp_path)
    nd, kv = 16, 16 * 8192
    # half the layers read every key, half read the last WINDOW of each sequence
    expected = 0.5 * full._decode_attn(nd, kv) + 0.5 * full._decode_attn(nd, nd * WINDOW)
    assert windowed._decode_attn(nd, kv) == pytest.approx(expected, rel=1e-12)
    long = BatchShape(num_decodes=nd, decode_kv_tokens=kv)
    saved = full.batch_cost(long).stage_times[0] - windowed.batch_cost(long).stage_times[0]
    layers = windowed.layers_per_stage
    assert saved == pytest.approx(layers * (full._decode_attn(nd, kv) - expected), rel=1e-9)
    assert saved > 0


def test_a_long_prompt_scores_at_most_the_window_per_query_on_sliding_layers(tmp_path):
    windowed, full = _estimators(tmp_path)
    npt = 8192
    pairs = npt * (npt + 1) / 2
    expected = 0.5 * full._prefill_attn(npt, 1, pairs, npt) + 0.5 * full._prefill_attn(
        npt, 1, npt * WINDOW, npt
    )
    assert windowed._prefill_attn(npt, 1, pairs, npt) == pytest.approx(expected, rel=1e-12)
    # a chunk after a long cached prefix reads the window's keys, not the prefix
    chunk, prefix = 512, 16384
    chunk_pairs = chunk * prefix + chunk * (chunk + 1) / 2
    got = windowed._prefill_attn(chunk, 1, chunk_pairs, prefix + chunk)
    want = 0.5 * full._prefill_attn(chunk, 1, chunk_pairs, prefix + chunk) + 0.5 * (
        full._prefill_attn(chunk, 1, chunk * WINDOW, WINDOW + chunk)
    )
    assert got == pytest.approx(want, rel=1e-12)


def test_windowed_runs_equal_batch_cost_and_survive_pickling(tmp_path):
    windowed, _ = _estimators(tmp_path)
    nd, kv = 24, 24 * 3000
    steps = list(itertools.islice(windowed.decode_steps(nd, kv), 3))
    for i, (_, stage, _, _) in enumerate(steps):
        batch = BatchShape(num_decodes=nd, decode_kv_tokens=kv + i * nd)
        assert stage == windowed.batch_cost(batch).stage_times[0]
    copy = pickle.loads(pickle.dumps(windowed))
    batch = BatchShape(num_decodes=nd, decode_kv_tokens=kv)
    assert copy.batch_cost(batch) == windowed.batch_cost(batch)
