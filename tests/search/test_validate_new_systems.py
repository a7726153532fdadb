"""aic-silicon rows on B300 and GB200 and of the newer mixtures of experts: how they map."""

from __future__ import annotations

from dataclasses import replace

import pytest

from estimators import Precision, load_engine
from estimators._aic_tables import SKU_SYSTEMS
from search._validate import select_points
from search._validate._aic_silicon import SYSTEM_TO_SKU
from search._validate._run import engine_for
from sku_catalog import load_catalog
from tests.search.silicon_rows import row


def moe_row(**overrides: str) -> dict[str, str]:
    """A MiniMax-M2.5 FP8 point on B300 (vLLM, TP 4, experts TP 4), as the public dump
    records it."""
    moe = {
        "silicon_data_source": "db-dump/2026-04-27; silicon_concurrency=32",
        "backend_version": "0.19.0",
        "model_path": "MiniMaxAI/MiniMax-M2.5",
        "system": "b300_sxm",
        "moe_quant_mode": "fp8",
        "attention_dp_size": "1",
        "moe_tp_size": "4",
        "moe_ep_size": "1",
    }
    return row(**{**moe, **overrides})


def test_every_system_maps_to_a_catalog_sku_and_back() -> None:
    catalog = load_catalog()
    assert SYSTEM_TO_SKU["b300_sxm"] == "b300" and SYSTEM_TO_SKU["gb200"] == "gb200"
    for system, sku in SYSTEM_TO_SKU.items():
        assert catalog.get(sku).id == sku
        assert SKU_SYSTEMS.get(sku, system) == system  # the operator tables' map agrees


def test_a_minimax_fp8_row_on_b300_maps() -> None:
    selection = select_points([moe_row()], models="moe")
    assert selection.skipped == {}
    [point] = selection.points
    assert (point.model, point.sku, point.tp, point.dp, point.ep) == (
        "MiniMaxAI/MiniMax-M2.5", "b300", 4, 1, 1,
    )  # fmt: skip
    assert point.moe and point.precision is Precision.FP8
    assert point.moe_quant_mode == "fp8"


def test_gb200_tensor_parallelism_stays_inside_the_nvl72_rack() -> None:
    """TP 16 is two HGX nodes but one NVLink domain of a GB200 rack (NVIDIA's own runs: the
    public dump's rack rows beyond TP 8 record no layout, see test_validate.py)."""
    own = "aic; silicon_concurrency=32"
    rows = [
        moe_row(system="gb200", tp_size="16", moe_tp_size="16", silicon_data_source=own),
        moe_row(system="b300_sxm", tp_size="16", moe_tp_size="16", silicon_data_source=own),
    ]
    selection = select_points(rows, models="moe")
    assert [(p.sku, p.tp) for p in selection.points] == [("gb200", 16)]
    assert selection.skipped == {"TP beyond one node (tp_size > 8 GPUs)": 1}


def test_a_tp_that_does_not_divide_the_heads_is_skipped_not_simulated() -> None:
    """TP 72 over DeepSeek's 128 heads: no deployment llmcap can represent."""
    own = "aic; silicon_concurrency=32"
    rows = [
        moe_row(system="gb200", model_path="deepseek-ai/DeepSeek-R1", tp_size="72",
                moe_tp_size="72", backend="sglang", silicon_data_source=own),
        moe_row(system="gb200", tp_size="48", moe_tp_size="48",
                silicon_data_source=own),  # MiniMax: 48 heads
    ]  # fmt: skip
    selection = select_points(rows, models="moe")
    assert [(p.model, p.tp) for p in selection.points] == [("MiniMaxAI/MiniMax-M2.5", 48)]
    assert selection.skipped == {"TP does not divide the attention heads (tp_size)": 1}


@pytest.mark.parametrize(
    ("model_path", "reason"),
    [
        ("zhipuai/GLM-5", "model not in the catalog (unknown architecture)"),  # sparse MLA
        ("Qwen/Qwen3.5-397B-A17B", "model not in the catalog (unknown architecture)"),
    ],
)
def test_models_with_attention_llmcap_cannot_price_are_skipped(
    model_path: str, reason: str
) -> None:
    selection = select_points([moe_row(model_path=model_path)], models="all")
    assert selection.points == [] and selection.skipped == {reason: 1}


@pytest.mark.parametrize(
    ("engine", "version", "profile"),
    [
        ("vllm", "nightly-5b8c30d62b754b57", "0.13"),  # vLLM's default (newest) profile
        ("sglang", "nightly-dev", "0.5.4"),
        ("vllm", "0.11.2", "0.11"),  # a release keeps the profile that covers it
    ],
)
def test_a_build_without_a_release_number_runs_the_default_profile(
    engine: str, version: str, profile: str
) -> None:
    [point] = select_points([moe_row()], models="moe").points
    point = replace(point, engine=engine, engine_version=version)
    assert engine_for(point).version == profile == load_engine(
        f"{engine}@{version}" if version[0].isdigit() else engine
    ).version
