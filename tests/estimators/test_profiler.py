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
