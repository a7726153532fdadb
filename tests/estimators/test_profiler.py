"""The torch profiler (`llmcap profile run`): its plan, and a tiny end-to-end run on CPU."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from estimators import BatchShape, load_model, make_estimator
from estimators._curves import monotone
from estimators._op_tables import layer_gemm_shapes, load_op_tables
from estimators.profiler import (
    QUICK_GRID,
    ProfilerError,
    ProfileSettings,
    run_profile,
    sku_for_gpu_name,
)
from estimators.profiler._plan import plan_profile
from sku_catalog import load_catalog

TINY = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
    "num_hidden_layers": 2, "vocab_size": 256, "max_position_embeddings": 2048,
}  # fmt: skip


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiny") / "config.json"
    path.write_text(json.dumps(TINY))
    return path


def test_plan_shards_every_gemm_and_head_shape_once():
    model = load_model("meta-llama/Llama-3.1-8B")
    plan = plan_profile(model, [1, 2, 3, 8])
    assert plan.tps == [1, 2, 8] and plan.skipped == [
        "TP 3: does not divide the 32 attention heads"
    ]
    shapes = {(g.n, g.k) for g in plan.gemms}
    for tp in (1, 2, 8):
        assert set(layer_gemm_shapes(model, tp).values()) <= shapes
        assert (-(-128256 // tp), 4096) in shapes  # the LM head, vocabulary over TP
    # TP 2's gate-up (2 x 7168, 4096) is measured once whatever else shares it
    assert len(plan.gemms) == len(shapes)
    assert [(h.heads, h.kv_heads, h.head_dim) for h in plan.heads] == [
        (32, 8, 128), (16, 4, 128), (4, 1, 128)
    ]  # fmt: skip


def test_gpu_names_map_to_catalog_skus():
    assert sku_for_gpu_name("NVIDIA H100 80GB HBM3") == "h100-sxm"
    assert sku_for_gpu_name("NVIDIA H100 PCIe") == "h100-pcie"
    assert sku_for_gpu_name("NVIDIA A100-SXM4-40GB") == "a100-40gb"
    assert sku_for_gpu_name("NVIDIA A100-SXM4-80GB") == "a100-80gb"
    assert sku_for_gpu_name("NVIDIA L40S") == "l40s" and sku_for_gpu_name("NVIDIA L4") == "l4"
    assert sku_for_gpu_name("Intel(R) Xeon(R) Platinum") is None
    assert sku_for_gpu_name("NVIDIA GB200") == "gb200"  # not b200, whose name it holds
    assert sku_for_gpu_name("NVIDIA B300 SXM6 AC") == "b300"
    assert sku_for_gpu_name("NVIDIA B200") == "b200"
    catalog = load_catalog()
    for name in ("NVIDIA H200", "NVIDIA B200", "NVIDIA A10G", "NVIDIA A40"):
        assert catalog.get(sku_for_gpu_name(name)) is not None


def test_fp8_on_a_device_without_fp8_gemms_says_so(tiny_config: Path, tmp_path: Path):
    pytest.importorskip("torch")
    model = load_model(str(tiny_config))
    settings = ProfileSettings(model, str(tiny_config), [1], dtypes=("fp8",), device="cpu")
    with pytest.raises(ProfilerError, match="fp8 GEMMs need an NVIDIA GPU of compute"):
        run_profile(settings, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_profiler_end_to_end_on_cpu_then_the_backend_reads_it(tiny_config: Path, tmp_path: Path):
    pytest.importorskip("torch")
    model = load_model(str(tiny_config))
    steps: list[tuple[int, int, str]] = []
    settings = ProfileSettings(
        model, str(tiny_config), [1, 2], device="cpu", quick=True, sku="a100-80gb",
        cpu_threads=1,
    )  # fmt: skip
    result = run_profile(settings, tmp_path / "t", lambda *a: steps.append(a))
    # 5 distinct (n, k) over both TP degrees, e.g. TP 1's gate-up = its LM head = (256, 64),
    # x 3 token counts; 2 head shapes x (4 prompts + 1 cached chunk) and x 4 decode points
    assert result.rows == {"gemm": 15, "context_attention": 10, "generation_attention": 8}
    assert steps[-1] == (33, 33, "done") and steps[0][:2] == (0, 33)
    assert any("all-reduce: skipped" in n for n in result.notes)

    tables = load_op_tables(tmp_path / "t")
    assert tables.meta.source == "llmcap-profiler" and tables.meta.device == "cpu"
    assert tables.meta.tp == [1, 2] and tables.meta.torch and tables.meta.sku == "a100-80gb"
    gemm = pd.read_csv(tmp_path / "t" / "gemm.csv")
    assert sorted(set(gemm["m"])) == list(QUICK_GRID.tokens)
    assert (gemm["latency_ms"] > 0).all() and (gemm["latency_ms"] < 1e3).all()

    sku = load_catalog().get("a100-80gb")
    for tp in (1, 2):
        est = make_estimator("profiled", model, sku, tp=tp, op_tables=tmp_path / "t")
        assert set(est.fallbacks) == ({"all_reduce"} if tp == 2 else set())
        for op, (n, k) in layer_gemm_shapes(model, tp).items():
            rows = gemm[(gemm["n"] == n) & (gemm["k"] == k)].sort_values("m")
            measured = rows["latency_ms"].to_numpy() * 1e-3
            got = np.array([est.gemm_time(op, m) for m in rows["m"]])
            assert np.allclose(got, monotone(measured), rtol=1e-12)
        cost = est.batch_cost(BatchShape(num_decodes=4, decode_kv_tokens=4 * 100))
        assert cost.stage_times[0] > 0
        assert "llmcap-profiler on" in est.describe()


def test_kernels_run_at_the_shapes_they_time():
    torch = pytest.importorskip("torch")
    from estimators.profiler._kernels import decode_op, gemm_op, prefill_op

    assert gemm_op(torch, "cpu", "bf16", 5, 64, 32)().shape == (5, 64)
    assert decode_op(torch, "cpu", "bf16", 2, 40, 4, 2, 16)().shape == (2, 4, 1, 16)
    # a chunk of 8 after 16 cached tokens: its last query sees all 24 keys, its first 17
    out = prefill_op(torch, "cpu", "bf16", 2, 8, 16, 4, 2, 16)()
    assert out.shape == (2, 4, 8, 16)
    try:
        fp8 = gemm_op(torch, "cpu", "fp8", 5, 64, 32)()
    except (RuntimeError, NotImplementedError):
        pytest.skip("this torch build has no fp8 GEMM on the CPU")
    assert fp8.shape == (16, 64) and fp8.dtype == torch.bfloat16  # m padded to 16


@pytest.mark.slow
def test_allreduce_processes_time_every_size_and_report_the_slowest_rank():
    torch = pytest.importorskip("torch")
    from estimators.profiler._allreduce import measure_allreduce

    rows = measure_allreduce(torch, 2, [1 << 10, 1 << 16], warmup=1, repeats=3, device="cpu")
    assert [(r["num_gpus"], r["message_bytes"]) for r in rows] == [(2, 1024), (2, 65536)]
    assert all(0 < r["latency_ms"] < 1e3 and r["implementation"] == "gloo" for r in rows)


def test_rotation_spans_twice_the_l2_within_the_memory_budget():
    from estimators.profiler._kernels import MAX_COPIES, ROTATION_BYTES, rotation_copies

    assert rotation_copies(ROTATION_BYTES // 4, 1 << 40) == 4
    assert rotation_copies(ROTATION_BYTES // 4 + 1, 1 << 40) == 4  # rounds up: 3 fall short
    assert rotation_copies(ROTATION_BYTES * 3, 1 << 40) == 1  # one copy is past the L2
    assert rotation_copies(1, 1 << 40) == MAX_COPIES
    assert rotation_copies(ROTATION_BYTES // 8, ROTATION_BYTES // 4) == 2  # what fits


def test_plan_measures_each_layer_gemm_in_every_dtype_asked_and_the_head_in_bf16():
    model = load_model("meta-llama/Llama-3.1-8B")
    plan = plan_profile(model, [1], ("bf16", "fp8"))
    layer = set(layer_gemm_shapes(model, 1).values())
    by_dtype = {dt: {(g.n, g.k) for g in plan.gemms if g.dtype == dt} for dt in ("bf16", "fp8")}
    assert by_dtype["fp8"] == layer and by_dtype["bf16"] == layer | {(128256, 4096)}


def test_time_op_on_the_cpu_times_one_call_alone():
    torch = pytest.importorskip("torch")
    from estimators.profiler._kernels import time_op

    calls: list[int] = []
    seconds, method = time_op(torch, "cpu", [lambda: calls.append(1)], warmup=2, repeats=5)
    assert method == "perf-counter" and len(calls) == 7 and 0 <= seconds < 0.1


def test_cuda_graph_timing_of_a_large_gemm_matches_eager_and_small_ones_lose_the_launch_gap():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from estimators.profiler._kernels import gemm_op, rotation_copies, time_op

    big = [gemm_op(torch, "cuda", "bf16", 8192, 8192, 8192) for _ in range(2)]
    graphed, method = time_op(torch, "cuda", big, warmup=3, repeats=10)
    eager, _ = time_op(torch, "cuda", big, warmup=3, repeats=10, graph=False)
    assert method == "cuda-graph" and graphed == pytest.approx(eager, rel=0.1)
    # 1 x 512 x 4096: a few microseconds of kernel, less than an eager launch each
    n = rotation_copies(2 * (4096 + 512 * 4096 + 512), 1 << 34)
    small = [gemm_op(torch, "cuda", "bf16", 1, 512, 4096) for _ in range(n)]
    graphed, _ = time_op(torch, "cuda", small, warmup=3, repeats=10)
    single, _ = time_op(torch, "cuda", small[:1], warmup=3, repeats=10, graph=False)
    assert graphed < single


TINY_MOE = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 64,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "intermediate_size": 128, "moe_intermediate_size": 32, "num_experts": 8,
    "num_experts_per_tok": 2, "num_hidden_layers": 2, "vocab_size": 256,
    "max_position_embeddings": 2048,
}  # fmt: skip


def test_plan_times_a_mixtures_experts_as_moe_tp_and_as_ep_at_each_degree():
    model = load_model("Qwen/Qwen3-235B-A22B")  # 128 experts of width 1536, top-8
    plan = plan_profile(model, [1, 4, 8], ("bf16", "fp8"))
    splits = [(e.moe_tp, e.moe_ep, e.dtype) for e in plan.moes]
    assert splits == [
        (tp, ep, dt) for tp, ep in ((1, 1), (4, 1), (1, 4), (8, 1), (1, 8))
        for dt in ("bf16", "fp8")
    ]  # fmt: skip
    e = plan.moes[2]
    assert (e.hidden, e.inter, e.width, e.topk, e.experts) == (4096, 1536, 384, 8, 128)
    # a degree the experts do not split over is a line, not a failure
    tiny = load_model("mistralai/Mixtral-8x7B-v0.1")  # 8 experts of width 14336
    assert [(e.moe_tp, e.moe_ep) for e in plan_profile(tiny, [16]).moes] == [(16, 1)]
    assert plan_profile(tiny, [16]).skipped[-1].startswith("experts at MoE TP 1, EP 16: 8 experts")


def test_plan_of_an_mla_model_leaves_its_attention_out_with_a_line():
    model = load_model("deepseek-ai/DeepSeek-V3")
    plan = plan_profile(model, [8], ("fp8",))
    assert not plan.heads and "multi-head latent attention: not timed" in plan.skipped[-1]
    ops = {op for g in plan.gemms for op in g.ops}
    assert ops == {"tp8 gate_up", "tp8 down", "tp8 lm_head"}
    assert [(e.moe_tp, e.moe_ep) for e in plan.moes] == [(8, 1), (1, 8)]


def test_balanced_routing_spreads_a_gpus_rows_over_its_experts():
    from estimators.profiler._kernels import moe_rows

    assert moe_rows(1, 8, 256, 1) == [1] * 8  # one token: its 8 experts, one row each
    assert moe_rows(64, 8, 256, 8) == [2] * 32  # 512 choices / 8 GPUs over 32 experts
    assert moe_rows(3, 2, 4, 1) == [2, 2, 1, 1]
    assert moe_rows(1, 8, 256, 16) == [1]  # a GPU receives at least the row it is timed on


def test_the_moe_kernel_returns_every_tokens_combined_output():
    torch = pytest.importorskip("torch")
    from estimators.profiler._kernels import moe_op

    try:
        out = moe_op(torch, "cpu", "bf16", 5, 64, 16, 2, 8, 2)()
    except (RuntimeError, NotImplementedError):
        pytest.skip("this torch build has no grouped GEMM on the CPU")
    assert out.shape == (5, 64) and out.dtype == torch.bfloat16
    assert bool(out.abs().sum(dim=1).gt(0).all())  # each token got its experts' output


@pytest.mark.slow
def test_a_mixtures_experts_table_is_what_the_profiled_backend_times_them_by(tmp_path: Path):
    pytest.importorskip("torch")
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY_MOE))
    model = load_model(str(config))
    settings = ProfileSettings(
        model, str(config), [1, 2], device="cpu", quick=True, sku="h200", cpu_threads=1
    )
    result = run_profile(settings, tmp_path / "t")
    if "moe" not in result.rows:  # a torch without grouped GEMMs on the CPU says why
        assert any("bf16 experts: skipped, torch cannot run them" in n for n in result.notes)
        pytest.skip("this torch build has no grouped GEMM on the CPU")
    # (TP 1), (TP 2, EP 1), (TP 1, EP 2) x 3 token counts
    assert result.rows["moe"] == 9
    moe = pd.read_csv(tmp_path / "t" / "moe.csv")
    assert set(moe["kernel"]) == {"torch-grouped-mm"} and (moe["latency_ms"] > 0).all()
    notes = load_op_tables(tmp_path / "t").meta.notes
    assert "attention: torch SDPA" in notes and "MoE: one GPU's experts" in notes
    sku = load_catalog().get("h200")
    for tp, ep in ((2, 1), (2, 2)):
        est = make_estimator("profiled", model, sku, tp=tp, ep=ep, op_tables=tmp_path / "t")
        assert "moe_experts" not in est.fallbacks
        assert str(tmp_path / "t" / "moe.csv") in est.describe()
        rows = moe[(moe["moe_tp"] == tp // ep) & (moe["moe_ep"] == ep)].sort_values("num_tokens")
        want = monotone(rows["latency_ms"].to_numpy() * 1e-3)
        got = [est._routed_experts(float(t))[0] for t in rows["num_tokens"]]
        if ep == 1:  # under EP the busiest rank's share scales the mean rank's time
            assert np.allclose(got, want, rtol=1e-9)
        else:
            assert all(g >= w * (1 - 1e-9) for g, w in zip(got, want, strict=True))
    # tables without a moe.csv: the roofline prices the experts, and says so
    (tmp_path / "t" / "moe.csv").unlink()
    est = make_estimator("profiled", model, sku, tp=2, op_tables=tmp_path / "t")
    assert est.fallbacks["moe_experts"].startswith("no moe.csv in")


@pytest.mark.parametrize("rows", [15, 5, 13])  # 3 rows a token, 1; uneven: 3 tokens get 2
def test_each_token_sums_its_rows_by_their_weights(rows: int):
    torch = pytest.importorskip("torch")
    from estimators.profiler._kernels import token_combiner

    tokens, hidden = 5, 8
    y = torch.randn(rows, hidden, dtype=torch.float64)
    weight = torch.rand(rows, 1, dtype=torch.float64)
    token_of_row = torch.arange(rows) % tokens
    want = torch.stack([(y * weight)[token_of_row == t].sum(0) for t in range(tokens)])
    got = token_combiner(torch, weight, token_of_row, tokens, hidden)(y)
    assert torch.allclose(got, want)
