"""MoE and MLA layers priced from aiconfigurator-core's measured moe / mla / mla_bmm tables."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from estimators import _aic_tables as aic
from estimators import load_engine, load_model, make_estimator
from estimators._aic_moe_mla import (
    DEFAULT_DISTRIBUTION,
    EP_ROWS_SUSPECT,
    ep_scaling,
    mla_bmm_curve,
    mla_grid,
    moe_curve,
    scaled_to_shape,
)
from estimators._contract import BatchShape, decode_steps
from estimators._profiled_mla import MlaProfiledEstimator
from estimators._roofline import routed_experts_part
from estimators._types import Precision
from sku_catalog import load_catalog
from tests.benchmark_scripts import load_benchmark

pytestmark = pytest.mark.skipif(
    not aic.aic_available(), reason="aiconfigurator-core (llmcap[aic]) is not installed"
)

V3_SHAPE_TP8 = (7168, 2048, 8, 256, 8, 1)  # hidden, expert width, top-k, experts, MoE TP, EP


def _moe_rows(system, engine, version, shape, dtype):
    _, df = aic.load_moe(system, engine, version)
    hidden, inter, topk, experts, moe_tp, moe_ep = shape
    return df[
        (df["hidden_size"] == hidden) & (df["inter_size"] == inter) & (df["topk"] == topk)
        & (df["num_experts"] == experts) & (df["moe_tp_size"] == moe_tp)
        & (df["moe_ep_size"] == moe_ep) & (df["moe_dtype"] == dtype)
        & (df["distribution"] == DEFAULT_DISTRIBUTION)
    ]  # fmt: skip


def test_moe_table_in_seconds_and_nearest_version():
    ref, df = aic.load_moe("h200_sxm", "sglang", "0.5.9")
    assert ref.version == "0.5.10"  # no 0.5.9 table: the oldest newer one
    raw = __import__("pandas").read_parquet(ref.path.open("rb"))
    assert df["seconds"].iloc[0] == pytest.approx(raw["latency"].iloc[0] * 1e-3)


def test_moe_curve_equals_the_row_at_a_grid_point_and_interpolates_between():
    label, curve, _ = moe_curve("h200_sxm", "sglang", "0.5.14", V3_SHAPE_TP8, ("fp8_block",))
    assert curve is not None and label.endswith("moe/sglang/0.5.14/moe_perf.parquet")
    rows = _moe_rows("h200_sxm", "sglang", "0.5.14", V3_SHAPE_TP8, "fp8_block")
    best = rows.groupby("num_tokens")["seconds"].min().sort_index()
    xs = list(best.index)
    a, b = xs[xs.index(256)], xs[xs.index(256) + 1]  # two neighbouring measured sizes
    assert curve(float(a)) == pytest.approx(best[best.index >= a].min())  # monotone row
    mid = curve(math.sqrt(a * b))  # log-log: the geometric mean of the neighbours' times
    assert mid == pytest.approx(math.sqrt(curve(float(a)) * curve(float(b))), rel=1e-9)
    assert curve(2.0 * xs[-1]) == pytest.approx(2.0 * curve(float(xs[-1])))  # linear above


def test_moe_curve_missing_shape_says_why():
    _, curve, why = moe_curve("h200_sxm", "sglang", "0.5.14", (7168, 2048, 8, 256, 3, 1),
                              ("fp8_block",))  # fmt: skip
    assert curve is None and "MoE TP 3" in why


def test_mla_tables_at_grid_points():
    _, df = aic.load_mla("h200_sxm", "sglang", "context", "0.5.14")
    _, grid = mla_grid("h200_sxm", "sglang", "0.5.14", "context", 16, "fp8")
    row = df[(df["num_heads"] == 16) & (df["kv_cache_dtype"] == "fp8") & (df["batch_size"] == 1)
             & (df["isl"] == 4096)]  # fmt: skip
    assert grid(1, 4096.0) == pytest.approx(row["seconds"].min())
    _, gen = aic.load_mla("h200_sxm", "sglang", "generation", "0.5.14")
    _, ggrid = mla_grid("h200_sxm", "sglang", "0.5.14", "generation", 16, "fp8")
    row = gen[(gen["num_heads"] == 16) & (gen["kv_cache_dtype"] == "fp8")
              & (gen["batch_size"] == 8) & (gen["step"] == 4095)]  # fmt: skip
    assert ggrid(8, 4096.0) == pytest.approx(row["seconds"].min())  # step + 1 KV tokens
    _, bmm = aic.load_mla_bmm("h200_sxm", "sglang", "0.5.14")
    _, pre = mla_bmm_curve("h200_sxm", "sglang", "0.5.14", "mla_gen_pre", 16)
    row = bmm[(bmm["op_name"] == "mla_gen_pre") & (bmm["num_heads"] == 16)
              & (bmm["bmm_dtype"] == "bfloat16") & (bmm["num_tokens"] == 64)]  # fmt: skip
    assert pre(64.0) <= row["seconds"].min() + 1e-15


@pytest.fixture(scope="module")
def h200():
    return load_catalog().get("h200")


def test_profiled_moe_layer_is_the_roofline_with_the_tables_experts(h200):
    qwen = load_model("Qwen/Qwen3-235B-A22B")
    eng = load_engine("trtllm@1.0.0rc3")
    est = make_estimator("profiled", qwen, h200, 4, 1, Precision.FP8, engine=eng,
                         engine_version="1.0.0rc3", ep=4)  # fmt: skip
    assert "moe_experts" not in est.fallbacks
    assert any("moe/trtllm/" in t for t in est.tables)
    _, want, _ = moe_curve(est.system, "trtllm", "1.0.0rc3", (4096, 1536, 8, 128, 1, 4),
                           ("fp8", "fp8_block"))  # fmt: skip
    roofline = make_estimator("roofline", qwen, h200, 4, 1, Precision.FP8, engine=eng, ep=4)
    moe, k = est._moe, est._k_experts
    w = qwen.matmul_weight_bytes(est.weights.experts)
    apart = 0
    for tokens in (1.0, 16.0, 16384.0):
        t, fl, by = est._routed_experts(tokens)
        roof = roofline._routed_experts(tokens)
        # the table times a rank's balanced share; the layer waits for the busiest rank
        busiest = routed_experts_part(moe, moe.rows(tokens), moe.touched(tokens), w, k)[0]
        mean = routed_experts_part(moe, moe.rows(tokens, False), moe.touched(tokens, False), w, k)
        assert busiest >= mean[0]
        assert t == pytest.approx(want(tokens) * busiest / mean[0])
        apart += t != pytest.approx(roof[0], rel=0.05)
        assert (fl, by) == roof[1:]  # FLOPs and bytes stay the roofline's count
    assert apart  # the table's time, not the roofline's, where the two differ
    # at 16,384 tokens the router's skew (LOAD_SKEW rows on the busiest rank) sets the ratio
    assert est._routed_experts(16384.0)[0] > 1.1 * want(16384.0)


def test_profiled_deepseek_prices_mla_from_tables_and_decode_steps_match(h200, v3):
    eng = load_engine("sglang@0.5.9")
    est = make_estimator("profiled", v3, h200, 8, 1, Precision.FP8, engine=eng,
                         engine_version="0.5.9")  # fmt: skip
    assert isinstance(est, MlaProfiledEstimator)
    assert not est.fallbacks, est.fallbacks
    _, gen = mla_grid(est.system, "sglang", "0.5.9", "generation", 16, est_kv(est))
    _, pre = mla_bmm_curve(est.system, "sglang", "0.5.9", "mla_gen_pre", 16)
    _, post = mla_bmm_curve(est.system, "sglang", "0.5.9", "mla_gen_post", 16)
    assert est._decode_attn(8, 8 * 1024) == pytest.approx(gen(8, 1024.0) + pre(8.0) + post(8.0))
    it = decode_steps(est, 8, 8 * 1000)
    for _ in range(3):
        step = next(it)
    c = est.batch_cost(BatchShape(num_decodes=8, decode_kv_tokens=8 * 1002))
    assert step == (c.cpu_overhead, c.stage_times[0], c.flops, c.bytes_moved)


def est_kv(est) -> str:
    return "fp8" if est.kv_precision is Precision.FP8 else "bfloat16"


def test_missing_moe_table_falls_back_to_the_roofline(h200):
    """llmcap's own op tables hold no MoE table: the routed experts are the roofline's."""
    from pathlib import Path

    import estimators

    tables = Path(estimators.__file__).parent / "data" / "op_tables" / "h200" / "qwen3-32b"
    qwen = load_model("Qwen/Qwen3-235B-A22B")
    est = make_estimator("profiled", qwen, h200, 8, 1, Precision.BF16, op_tables=tables, ep=8)
    assert est._measured_experts is None and "moe_experts" in est.fallbacks
    roof = make_estimator("roofline", qwen, h200, 8, 1, Precision.BF16, ep=8)
    assert est._routed_experts(512.0) == roof._routed_experts(512.0)


def test_mla_eager_prefill_cost_is_the_module_tables_difference(h200, v3):
    """SGLang's eager MLA prefill layer costs the fitted fixed cost more than the same
    deployment without an engine profile; decode is unchanged."""
    from estimators._mla import mla_prefill_eager_seconds

    fit = load_benchmark("fit_mla_eager")
    seconds, _ = fit.eager_cost("h200_sxm", "sglang")
    assert mla_prefill_eager_seconds("sglang", "h200") == pytest.approx(seconds, abs=1e-7)
    assert 3e-4 < seconds < 1e-3  # the eager module: hundreds of microseconds a layer
    assert mla_prefill_eager_seconds("trtllm", "h200") < 1e-5
    assert mla_prefill_eager_seconds(None, "h200") == 0.0
    # the engine's launch floor (engines.yaml eager_launch) left out: the MLA term alone
    sglang = replace(load_engine("sglang"), eager_launch=None)
    sg = make_estimator("roofline", v3, h200, 8, 1, Precision.FP8, engine=sglang)
    assert sg._mla_eager == pytest.approx(seconds, abs=1e-7)
    prefill = BatchShape(num_prefill_tokens=1024, num_prefills=1,
                         prefill_attn_pairs=1024 * 1025 / 2, prefill_kv_tokens=1024)  # fmt: skip
    decode = BatchShape(num_decodes=8, decode_kv_tokens=8000)
    with_eager = (sg.batch_cost(prefill).stage_times[0], sg.batch_cost(decode).stage_times[0])
    sg._mla_eager = 0.0
    without = (sg.batch_cost(prefill).stage_times[0], sg.batch_cost(decode).stage_times[0])
    assert with_eager[0] - without[0] == pytest.approx(v3.num_layers * seconds, abs=1e-5)
    assert with_eager[1] == without[1]


def test_mla_eager_folds_leave_the_held_out_tables_out(h200, v3):
    """GPU fold: the held-out GPU takes its engine's mean over the other GPUs; DeepSeek-V3
    (model) fold: no MLA module table is left, so no eager cost."""
    from estimators import mla_eager_fold, mla_eager_table
    from estimators._mla import _eager_table, mla_prefill_eager_seconds

    packaged = _eager_table()["sglang"]
    others = [v for s, v in packaged.items() if s != "h200"]
    fold = mla_eager_fold(exclude_sku="h200")
    assert fold["sglang"]["h200"] == pytest.approx(sum(others) / len(others))
    assert fold["sglang"]["b200"] == packaged["b200"]
    with mla_eager_table(fold):
        got = mla_prefill_eager_seconds("sglang", "h200")
        est = make_estimator(
            "roofline", v3, h200, 8, 1, Precision.FP8, engine=load_engine("sglang")
        )
    assert got == pytest.approx(sum(others) / len(others) * 1e-6)
    assert est._mla_eager == pytest.approx(got)
    with mla_eager_table(mla_eager_fold(exclude_mla=True)):
        assert mla_prefill_eager_seconds("sglang", "h200") == 0.0
    assert mla_prefill_eager_seconds("sglang", "h200") == pytest.approx(packaged["h200"] * 1e-6)


@pytest.mark.parametrize(
    ("model_name", "engine"),
    [("Qwen/Qwen3-235B-A22B", "sglang@0.5.9"), ("deepseek-ai/DeepSeek-V3", "trtllm")],
)
def test_auto_takes_eager_iterations_experts_from_the_table_and_graphed_ones_from_the_roofline(
    model_name, engine
):
    import warnings

    model, sku, profile = load_model(model_name), load_catalog().get("h200"), load_engine(engine)
    kwargs = dict(tp=8, precision=Precision.FP8, engine=profile, engine_version=profile.version)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = make_estimator("auto", model, sku, **kwargs)
    roof = make_estimator("roofline", model, sku, tp=8, precision=Precision.FP8, engine=profile)
    prof = make_estimator("profiled", model, sku, **kwargs)
    graphed = profile.graph_max_batch  # the engine replays CUDA graphs up to this batch
    assert f"routed experts above {graphed} tokens" in auto.selection_note
    assert "moe_perf.parquet" in auto.describe()
    for tokens in (1, 64, graphed):  # graphed: the roofline's experts
        assert auto._routed_experts(tokens) == roof._routed_experts(tokens)
    for tokens in (graphed + 1, 2048, 8192):  # eager: the table's, as the profiled backend's
        assert auto._routed_experts(tokens)[0] == prof._routed_experts(tokens)[0]
        assert auto._routed_experts(tokens)[1:] == roof._routed_experts(tokens)[1:]
    # the tables time the experts of a long prefill far above the roofline's grouped GEMMs
    assert auto._routed_experts(8192)[0] > 1.5 * roof._routed_experts(8192)[0]


def test_auto_attaches_no_table_without_an_engine_that_has_one():
    import warnings

    model, sku = load_model("Qwen/Qwen3-235B-A22B"), load_catalog().get("h200")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vidur = make_estimator("auto", model, sku, tp=8, precision=Precision.FP8)
        a40 = make_estimator(
            "auto", model, load_catalog().get("a40"), tp=8, engine=load_engine("vllm")
        )
    for est in (vidur, a40):
        assert est._measured_experts is None
        assert "routed experts above" not in est.selection_note


def test_the_engines_default_moe_kernel_picks_the_table_rows():
    """vLLM runs MXFP4 experts on Blackwell with FlashInfer's TensorRT-LLM kernels
    (engines.yaml moe_kernels): its 0.19.0 B200 table times another kernel only, so the
    curve comes from the 0.24.0 table's rows of that kernel, faster at a prefill's size."""
    from estimators._profiled import routed_experts_curve

    b200 = load_catalog().get("b200")
    gptoss = load_model("openai/gpt-oss-120b")
    est = make_estimator("roofline", gptoss, b200, engine=load_engine("vllm"))
    label, curve, _ = routed_experts_curve(est, "b200_sxm", "vllm", "0.19.0")
    assert "/vllm/0.24.0/" in label
    shape = (2880, 2880, 4, 128, 1, 1)
    _, any_kernel, _ = moe_curve("b200_sxm", "vllm", "0.19.0", shape, ("w4a16_mxfp4",))
    assert curve(8192.0) < 0.5 * any_kernel(8192.0)  # 0.19.0's vllm_mxfp4_moe
    fi = _moe_rows("b200_sxm", "vllm", "0.24.0", shape, "w4a16_mxfp4")
    fi = fi[fi["kernel_source"].str.contains("flashinfer_trtllm_mxfp4_bf16")]
    assert curve(8192.0) == pytest.approx(fi[fi["num_tokens"] == 8192]["seconds"].min())
    # an engine without a default named keeps the nearest version's fastest kernel
    sglang = make_estimator("roofline", gptoss, b200, engine=load_engine("sglang"))
    assert "/sglang/0.5.14/" in routed_experts_curve(sglang, "b200_sxm", "sglang", "0.5.14")[0]
    _, none, why = moe_curve("b200_sxm", "vllm", "0.24.0", shape, ("w4a16_mxfp4",), kernel="nok")
    assert none is None and "of kernel nok" in why


def _kernel_rows(shapes_seconds, moe_tp=1, moe_ep=1, dtype="w4a16_mxfp4"):
    """MoE table rows of one kernel: {(hidden, width, top-k, experts): {tokens: seconds}}."""
    import pandas as pd

    return pd.DataFrame(
        [
            dict(hidden_size=h, inter_size=i, topk=k, num_experts=e, moe_tp_size=moe_tp,
                 moe_ep_size=moe_ep, moe_dtype=dtype, distribution=DEFAULT_DISTRIBUTION,
                 kernel_source="marlin", num_tokens=n, seconds=t)
            for (h, i, k, e), times in shapes_seconds.items()
            for n, t in times.items()
        ]
    )


def test_a_kernel_measured_at_another_shape_is_priced_at_the_same_tokens_per_expert():
    """Shape (1024, 512, top-16 of 512) measured; (2048, 512, top-4 of 64) asked: the same
    tokens per expert (x 16/512 against x 4/64) at half the token count, and the experts'
    total size 64 x 2048 x 512 against 512 x 1024 x 512: a quarter of the time."""
    rows = _kernel_rows({(1024, 512, 16, 512): {1: 1e-5, 64: 2e-5, 1024: 8e-5, 4096: 3e-4}})
    source, curve = scaled_to_shape(rows, (2048, 512, 4, 64, 1, 1), ("w4a16_mxfp4",))
    assert source == "hidden 1024, expert width 512, top-16 of 512"
    assert list(curve.xs) == [32.0, 512.0, 2048.0]  # 1 token x 16/512 x 64/4 < 1: dropped
    assert curve(512.0) == pytest.approx(8e-5 / 4)
    assert curve(2048.0) == pytest.approx(3e-4 / 4)
    assert curve(4096.0) == pytest.approx(2 * 3e-4 / 4)  # linear in work above


def test_the_nearest_measured_expert_size_is_scaled_and_other_parallelism_is_not_used():
    rows = _kernel_rows({(4096, 4096, 8, 64): {8: 1.0, 64: 2.0},
                         (2048, 1024, 8, 64): {8: 3.0, 64: 4.0}})  # fmt: skip
    source, curve = scaled_to_shape(rows, (2048, 2048, 8, 64, 1, 1), ("w4a16_mxfp4",))
    assert source.startswith("hidden 2048, expert width 1024")  # 2M elements from 4M, not 16M
    assert curve(64.0) == pytest.approx(4.0 * 2)
    assert scaled_to_shape(rows, (2048, 2048, 8, 64, 2, 1), ("w4a16_mxfp4",)) is None
    assert scaled_to_shape(rows, (2048, 2048, 8, 64, 1, 1), ("nvfp4",)) is None


def test_a_named_kernel_without_rows_at_the_shape_is_scaled_from_its_other_shape():
    """vLLM's Marlin MXFP4 kernel is timed on H100 at one shape (hidden 3,584, top-16 of
    896), not gpt-oss's: its curve for gpt-oss is scaled from there, and at a prefill's
    size it runs over twice as long as the Hopper default kernel measured at gpt-oss's."""
    shape = (2880, 2880, 4, 128, 2, 1)
    label, marlin, why = moe_curve("h100_sxm", "vllm", "0.24.0", shape, ("w4a16_mxfp4",),
                                   kernel="marlin")  # fmt: skip
    assert why == "" and "marlin at hidden 3584, expert width 3072, top-16 of 896" in label
    _, triton, _ = moe_curve("h100_sxm", "vllm", "0.24.0", shape, ("w4a16_mxfp4",),
                             kernel="oaitriton")  # fmt: skip
    assert marlin(8192.0) > 2 * triton(8192.0)
    _, anything, _ = moe_curve("h100_sxm", "vllm", "0.24.0", shape, ("w4a16_mxfp4",))
    assert anything(8192.0) == pytest.approx(triton(8192.0))  # no kernel named: no scaling


def test_ep_scaling_ratios_at_the_largest_common_token_count():
    import pandas as pd

    script = load_benchmark("moe_table_ep_scaling")
    base = {"kernel_source": "k", "moe_dtype": "fp8", "hidden_size": 64, "inter_size": 32,
            "topk": 2, "num_experts": 8}  # fmt: skip
    rows = pd.DataFrame(
        [
            {**base, "moe_ep_size": 1, "num_tokens": 16, "seconds": 4.0},
            {**base, "moe_ep_size": 1, "num_tokens": 64, "seconds": 8.0},
            {**base, "moe_ep_size": 2, "num_tokens": 64, "seconds": 4.4},
            {**base, "moe_ep_size": 2, "num_tokens": 64, "seconds": 4.0},  # the faster kernel
            {**base, "moe_ep_size": 4, "num_tokens": 16, "seconds": 2.0},
            {**base, "moe_ep_size": 4, "num_tokens": 128, "seconds": 1.0},  # EP 1 lacks 128
        ]
    )
    [found] = script.ep_ratios(rows)
    *shape, tokens, ratios = found
    assert tuple(shape) == ("k", "fp8", 64, 32, 2, 8)
    assert tokens == 16  # EP 4's only token count EP 1 also measured (the last one compared)
    assert ratios == {2: 0.5, 4: 0.5}
    assert script.ep_ratios(rows[rows["moe_ep_size"] == 1]) == []  # nothing to compare


def test_deepseek_shape_ep_rows_of_the_flashinfer_trtllm_tables_do_not_scale():
    """The finding benchmarks/moe_table_ep_scaling.py documents: at DeepSeek-V3's shape
    SGLang's FlashInfer TensorRT-LLM table times EP 2 as EP 1, at Kimi-K2's it halves."""
    script = load_benchmark("moe_table_ep_scaling")
    _, df = aic.load_moe("gb200", "sglang", "0.5.14")
    rows = df[(df["moe_tp_size"] == 1) & (df["distribution"] == "balanced")
              & (df["kernel_source"] == "sglang_flashinfer_trtllm_moe")
              & (df["moe_dtype"] == "fp8_block")]  # fmt: skip
    ep2 = {tuple(s[3:6]): r[2] for *s, _tokens, r in script.ep_ratios(rows) if 2 in r}
    assert ep2[(2048, 8, 256)] >= EP_ROWS_SUSPECT  # DeepSeek-V3: group-limited routing
    assert ep2[(2048, 8, 384)] < 0.6  # Kimi-K2: the rank's share, about half


def _fastest_row(rows, tokens):
    return rows[rows["num_tokens"] == tokens]["seconds"].min()


def test_ep_rows_that_do_not_scale_are_priced_from_ep1_and_the_kernels_scaling_elsewhere():
    """DeepSeek-V3's EP-8 rows in SGLang's FlashInfer TensorRT-LLM table time EP 1's work;
    the curve is its EP-1 rows times the kernel's EP-8 scaling at Kimi-K2's shape (the
    same hidden size and expert width), which scales."""
    v3_ep8, kimi = (7168, 2048, 8, 256, 1, 8), (7168, 2048, 8, 384, 1, 8)
    kernel = "flashinfer_trtllm"
    label, curve, why = moe_curve("gb200", "sglang", "0.5.14", v3_ep8, ("fp8_block",),
                                  kernel=kernel)  # fmt: skip
    assert curve is not None and not why
    assert "the kernel's EP 8 scaling at hidden 7168, expert width 2048, top-8 of 384" in label
    def kernel_rows(shape):
        rows = _moe_rows("gb200", "sglang", "0.5.14", shape, "fp8_block")
        return rows[rows["kernel_source"].str.contains(kernel)]

    v3_ep1, k1, k8 = kernel_rows((*v3_ep8[:5], 1)), kernel_rows((*kimi[:5], 1)), kernel_rows(kimi)
    tokens = 8192
    expected = _fastest_row(v3_ep1, tokens) * _fastest_row(k8, tokens) / _fastest_row(k1, tokens)
    assert curve(float(tokens)) == pytest.approx(expected, rel=1e-9)
    measured = _fastest_row(kernel_rows(v3_ep8), tokens)
    assert curve(float(tokens)) < 0.5 * measured  # the rank's share, not EP 1's work
    # Kimi-K2's own EP rows scale: read as measured
    label, kcurve, _ = moe_curve("gb200", "sglang", "0.5.14", kimi, ("fp8_block",), kernel=kernel)
    assert "scaling" not in label
    assert kcurve(float(tokens)) == pytest.approx(_fastest_row(k8, tokens))


def test_ep_scaling_and_the_fallback_without_a_shape_that_scales():
    import pandas as pd

    from estimators._aic_moe_mla import _ep_from_ep1, _ep_rows_scale

    def shape_rows(experts, times_by_ep):
        return [
            {"kernel_source": "k", "moe_dtype": "fp8", "hidden_size": 64, "inter_size": 32,
             "topk": 2, "num_experts": experts, "moe_tp_size": 1, "distribution": "balanced",
             "moe_ep_size": ep, "num_tokens": n, "seconds": t}
            for ep, times in times_by_ep.items() for n, t in zip((64, 128), times, strict=True)
        ]  # fmt: skip

    flat = shape_rows(8, {1: (2.0, 4.0), 2: (2.0, 4.0), 4: (1.8, 3.6)})  # EP rows = EP 1's
    scales = shape_rows(16, {1: (1.0, 2.0), 2: (0.5, 1.0), 4: (0.3, 0.5)})
    rows = pd.DataFrame(flat + scales)
    assert not _ep_rows_scale(rows[rows["num_experts"] == 8])
    assert _ep_rows_scale(rows[rows["num_experts"] == 16])
    assert list(ep_scaling(rows[rows["num_experts"] == 16], 4)) == [0.3, 0.25]
    assert EP_ROWS_SUSPECT == 0.8
    label, curve, why = _ep_from_ep1("t", rows, (64, 32, 2, 8, 1, 4), "fp8", "balanced")
    assert "EP 4 scaling at hidden 64, expert width 32, top-2 of 16" in label and not why
    assert curve(64.0) == pytest.approx(2.0 * 0.3) and curve(128.0) == pytest.approx(4.0 * 0.25)
    only_flat = pd.DataFrame(flat)
    label, curve, why = _ep_from_ep1("t", only_flat, (64, 32, 2, 8, 1, 4), "fp8", "balanced")
    assert curve is None and "do not scale with EP" in why and "no shape of the kernel" in why


def test_only_the_kernels_whose_ep_rows_scale_price_an_ep_deployment(monkeypatch):
    """Of two kernels at one shape, the one whose EP rows take EP 1's time is left out of
    an EP deployment's curve; with no other kernel, its EP-1 rows are scaled instead."""
    import types

    import pandas as pd

    from estimators import _aic_moe_mla

    def rows(kernel, experts, times_by_ep):
        return [
            {"kernel_source": kernel, "moe_dtype": "fp8", "hidden_size": 64, "inter_size": 32,
             "topk": 2, "num_experts": experts, "moe_tp_size": 1, "distribution": "balanced",
             "moe_ep_size": ep, "num_tokens": n, "seconds": t}
            for ep, times in times_by_ep.items() for n, t in zip((64, 128), times, strict=True)
        ]  # fmt: skip

    suspect = rows("fast", 8, {1: (1.0, 2.0), 2: (1.0, 2.0), 4: (0.9, 1.8)})
    scaling = rows("slow", 8, {1: (3.0, 6.0), 2: (1.5, 3.0), 4: (1.2, 2.4)})
    reference = rows("fast", 16, {1: (1.0, 2.0), 2: (0.5, 1.0), 4: (0.25, 0.5)})
    table = pd.DataFrame(suspect + scaling + reference)
    ref = types.SimpleNamespace(label="t")
    monkeypatch.setattr(_aic_moe_mla.aic, "load_moe", lambda *a: (ref, table))
    curve_of = _aic_moe_mla.moe_curve.__wrapped__
    label, curve, _ = curve_of("s", "e", None, (64, 32, 2, 8, 1, 4), ("fp8",))
    assert label == "t" and curve(64.0) == pytest.approx(1.2)  # the scaling kernel's row
    label, curve, _ = curve_of("s", "e", None, (64, 32, 2, 8, 1, 4), ("fp8",), kernel="fast")
    assert "EP 4 scaling at hidden 64, expert width 32, top-2 of 16" in label
    assert curve(64.0) == pytest.approx(1.0 * 0.25)  # its EP 1 x its scaling at 16 experts
    label, curve, _ = curve_of("s", "e", None, (64, 32, 2, 8, 1, 1), ("fp8",), kernel="fast")
    assert curve(64.0) == pytest.approx(1.0)  # EP 1 reads its own rows
