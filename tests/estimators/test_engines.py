"""Engine profiles: loading, and what they change in the memory plan and the cost model."""

from __future__ import annotations

from dataclasses import replace

import pytest

from estimators import (
    BatchShape,
    Precision,
    UnknownEngineError,
    available_engines,
    load_engine,
    load_model,
    make_estimator,
    plan_memory,
)
from simulator import SchedulerKind
from simulator._deployment import Deployment, engine_scheduler, prepare
from sku_catalog import load_catalog

GIB = float(1 << 30)


@pytest.fixture(scope="module")
def llama70b():
    return load_model("meta-llama/Llama-3.1-70B")


def test_every_profile_loads():
    engines = available_engines()
    assert set(engines) == {"vidur", "vllm", "sglang", "trtllm"}
    for name, versions in engines.items():
        for version in versions:
            assert load_engine(f"{name}@{version}").key == f"{name}@{version}"


@pytest.mark.parametrize(
    ("spec", "key"),
    [
        (None, "vllm@0.13"),  # current vLLM is the default
        ("vllm", "vllm@0.13"),
        ("vllm@0.12.0", "vllm@0.11"),
        ("vllm@0.24.0", "vllm@0.13"),
        ("sglang@0.5.1.post1", "sglang@0.4"),
        ("sglang@0.5.6.post2", "sglang@0.5.4"),
        ("trtllm@1.0.0rc3", "trtllm@1.0"),
        ("VIDUR", "vidur@2024"),
    ],
)
def test_versions_select_the_profile_covering_them(spec, key):
    assert load_engine(spec).key == key


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("tgi", "unknown engine 'tgi'; available engines"),
        ("vllm@0.5", "no profile covers version 0.5"),
        ("vllm@nightly", "not a release number"),
    ],
)
def test_unknown_engine_or_version_names_what_is_available(spec, says):
    with pytest.raises(UnknownEngineError) as info:
        load_engine(spec)
    assert says in str(info.value)
    assert "vllm" in str(info.value)


def test_vidur_profile_plans_memory_as_before(llama8b, h100):
    before = plan_memory(llama8b, h100, 1, 1, max_num_batched_tokens=8192)
    vidur = plan_memory(
        llama8b, h100, 1, 1, max_num_batched_tokens=8192, engine=load_engine("vidur")
    )
    assert vidur.num_kv_blocks == before.num_kv_blocks
    assert vidur.gpu_memory_utilization == 0.9


def test_vidur_profile_costs_batches_as_before(llama8b, h100):
    batch = BatchShape(num_decodes=32, decode_kv_tokens=32 * 1024)
    before = make_estimator("roofline", llama8b, h100, 2).batch_cost(batch)
    vidur = make_estimator("roofline", llama8b, h100, 2, engine=load_engine("vidur")).batch_cost(
        batch
    )
    assert vidur == before


def test_memory_plans_of_each_engine(llama70b, h100):
    """Llama-3.1-70B, FP8 weights, TP1 on H100, 8192 batched tokens."""

    def plan(engine):
        return plan_memory(
            llama70b, h100, 1, 1, Precision.FP8, max_num_batched_tokens=8192,
            engine=load_engine(engine),
        )  # fmt: skip

    vidur = plan("vidur")
    assert (vidur.kv_precision, vidur.gpu_memory_utilization) == (Precision.BF16, 0.9)
    assert vidur.activation_bytes / GIB == pytest.approx(1.963, abs=1e-3)  # 256 sampler rows
    assert vidur.num_kv_blocks == 212

    v011 = plan("vllm@0.11")  # 1024 sampler rows (max_num_seqs), 16-bit KV
    assert v011.activation_bytes / GIB == pytest.approx(2.697, abs=1e-3)
    assert (v011.kv_precision, v011.num_kv_blocks) == (Precision.BF16, 61)

    v013 = plan("vllm@0.13")  # FP8 KV from the checkpoint: twice the tokens of the same bytes
    assert v013.kv_precision is Precision.FP8
    assert v013.num_kv_blocks == 123

    sg_old = plan("sglang@0.4")  # mem_fraction_static 0.88 at TP1, activations outside it
    assert (sg_old.gpu_memory_utilization, sg_old.activation_bytes) == (0.88, 0.0)
    assert sg_old.memory_fraction_name == "mem_fraction_static"
    assert sg_old.num_kv_blocks == 287

    sg_new = plan("sglang@0.5.4")  # reserved 512 + 1.5 x 8192 + 2 x 256 + 128 MiB
    reserved = 512 + 1.5 * 8192 + 2 * 256 + 128
    total_mib = h100.memory_bytes / (1 << 20)
    assert sg_new.gpu_memory_utilization == round((total_mib - reserved) / total_mib, 3) == 0.835
    assert not sg_new.fits  # 70B in FP8 does not fit one H100 under SGLang's default fraction

    trt = plan("trtllm")  # 0.9 of the memory free after weights, activations and context
    assert trt.memory_fraction_of == "free"
    assert trt.kv_precision is Precision.FP8
    free = h100.memory_bytes - trt.weights_bytes - trt.activation_bytes - trt.reserve_bytes
    assert trt.kv_bytes == pytest.approx(0.9 * free)
    assert trt.num_kv_blocks == 3407


def test_explicit_options_override_the_profile(llama70b, h100):
    plan = plan_memory(
        llama70b, h100, 1, 1, Precision.FP8, kv_precision=Precision.BF16,
        gpu_memory_utilization=0.95, max_num_batched_tokens=8192, engine=load_engine("vllm"),
    )  # fmt: skip
    assert (plan.kv_precision, plan.gpu_memory_utilization) == (Precision.BF16, 0.95)


def test_overhead_and_allreduce_of_each_engine(llama8b, h100):
    """Llama-3.1-8B TP2 on H100, 32 decodes of 1024 tokens."""
    batch = BatchShape(num_decodes=32, decode_kv_tokens=32 * 1024)

    def cost(engine):
        est = make_estimator("roofline", llama8b, h100, 2, engine=load_engine(engine))
        return est, est.batch_cost(batch)

    vidur, c_vidur = cost("vidur")  # Vidur's fitted CPU overhead, NCCL ring
    assert c_vidur.cpu_overhead * 1e3 == pytest.approx(0.8063 + 0.03748 * 32, rel=1e-6)
    assert vidur.all_reduce_time(16384.0) * 1e6 == pytest.approx(26.16, abs=0.01)

    sync, c_sync = cost("vllm@0.11")  # synchronous engine core: host work visible
    assert c_sync.cpu_overhead * 1e3 == pytest.approx(0.181 + 0.0066 * 32, rel=1e-6)
    # vLLM's custom all-reduce (hopper fit): the faster of the one-shot line (4.74 us + ring
    # term at 0.382 of 450 GB/s) and the large-message line (25.9 us, 0.74)
    def line(latency_us: float, eff: float, nbytes: float) -> float:
        return latency_us * 1e-6 + 2 * 1 / 2 * nbytes / (450e9 * eff)

    small, large = 16384.0, 64 * 2.0**20
    assert sync.all_reduce_time(small) == pytest.approx(line(4.74, 0.382, small), rel=1e-9)
    assert sync.all_reduce_time(large) == pytest.approx(line(25.9, 0.74, large), rel=1e-9)
    assert line(25.9, 0.74, large) < 0.6 * line(4.74, 0.382, large)  # two-shot wins big
    assert c_sync.stage_times[0] < c_vidur.stage_times[0]  # faster all-reduces

    _, c_async = cost("vllm@0.13")  # async scheduling: host work hidden behind the GPU step
    assert c_async.cpu_overhead == 0.0
    assert c_async.stage_times == c_sync.stage_times

    _, c_trt = cost("trtllm")
    assert c_trt.cpu_overhead == 0.0


def test_fp8_gemms_keep_the_kernel_cost_where_the_engine_fuses_their_quantization(
    llama70b, h100
):
    """TensorRT-LLM's Llama layer writes FP8 from the kernel before each GEMM; its Qwen3
    layer and vLLM quantize in a kernel of their own, as the FP8 GEMM tables time it."""
    trt = load_engine("trtllm")
    assert trt.fp8_quant_fused("llama") and not trt.fp8_quant_fused("qwen3")
    assert not load_engine("vllm").fp8_quant_fused("llama")
    assert llama70b.model_type == "llama"
    assert load_model("Qwen/Qwen3-32B").model_type == "qwen3"

    def gemms(model):  # one layer's GEMM seconds, 4 decodes, FP8 weights, TP8
        est = make_estimator("roofline", model, h100, 8, precision=Precision.FP8, engine=trt)
        ops = est.operator_times(BatchShape(num_decodes=4, decode_kv_tokens=4 * 1024))
        return est.constants, {op: t for op, t in ops.items() if op.endswith("_proj")}

    c, fused = gemms(llama70b)
    _, own_kernel = gemms(replace(llama70b, model_type="qwen3"))  # same shapes, not fused
    assert set(fused) == {"attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj"}
    assert c.matmul_fp8_overhead_us > 2 * c.matmul_overhead_us  # what the FP8 tables hold
    for op, t in fused.items():  # each GEMM drops the quantization's share, nothing else
        saved = (c.matmul_fp8_overhead_us - c.matmul_overhead_us) * 1e-6
        assert own_kernel[op] - t == pytest.approx(saved, rel=1e-9)


def test_overlap_shows_what_the_gpu_step_does_not_hide(llama8b, h100):
    engine = load_engine("vllm@0.13")
    est = make_estimator("roofline", llama8b, h100, 1, engine=engine)
    tiny = est.batch_cost(BatchShape(num_decodes=1, decode_kv_tokens=16))
    host = engine.decode_overhead.seconds(1)
    assert tiny.cpu_overhead == pytest.approx(max(0.0, host - tiny.stage_times[0]))


@pytest.mark.parametrize(
    ("engine", "kind", "budget", "cap"),
    [
        ("vllm", SchedulerKind.SARATHI, 8192, 1024),  # max_num_batched_tokens, max_num_seqs
        ("sglang", SchedulerKind.SGLANG, 8192, 4096),  # chunked_prefill_size
        ("trtllm", SchedulerKind.SARATHI, 8192, 2048),  # max_num_tokens, max_batch_size
        ("vidur", SchedulerKind.SARATHI, 512, 128),  # llmcap's historical defaults
    ],
)
def test_default_policy_and_limits(engine, kind, budget, cap, h100):
    sched = engine_scheduler(load_engine(engine), h100, 1)
    assert (sched.kind, sched.token_budget(), sched.batch_size) == (kind, budget, cap)


@pytest.mark.parametrize(
    ("engine", "reserves"),
    [("trtllm", True), ("vllm", False), ("sglang", False), ("vidur", False)],
)
def test_kv_admission_rule_of_each_engine(engine, reserves, h100):
    # TensorRT-LLM's GUARANTEED_NO_EVICT reserves a request's whole length before it starts
    assert load_engine(engine).reserves_kv_full_length is reserves
    sched = engine_scheduler(load_engine(engine), h100, 1, kind="orca")
    assert sched.reserve_full_length is reserves  # another policy keeps the admission rule


def test_vllm_limits_depend_on_the_gpu():
    catalog = load_catalog()
    a100 = load_engine("vllm").limits(catalog.get("a100-80gb"))
    assert (a100.token_budget, a100.batch_cap) == (2048, 256)  # A100 keeps the small defaults
    b200 = load_engine("sglang").limits(catalog.get("b200"))
    assert b200.token_budget == 16384


def test_deployment_records_its_engine(llama8b, h100):
    prepared = prepare(Deployment(llama8b, h100, engine=load_engine("sglang")))
    assert prepared.deployment.engine_key == "sglang@0.5.4"
    assert prepared.memory.engine == "sglang@0.5.4"
    assert Deployment(llama8b, h100).engine_key == "vidur@2024"


def test_a_profiles_moe_exchange_rule_is_checked():
    """engines.yaml moe_all_to_all: one of the rules, a clear error naming it otherwise."""
    from estimators._engines import _build, _engines_yaml

    body = _engines_yaml()["trtllm"]["profiles"]["1.0"]
    assert _build("trtllm", "1.0", body).moe_all_to_all == "above_top_k"
    with pytest.raises(ValueError, match="moe_all_to_all 'sometimes' is not one of always"):
        _build("trtllm", "1.0", {**body, "moe_all_to_all": "sometimes"})


def test_no_profile_moves_its_block_fp8_gemms_off_the_tables_kernel_and_a_bad_one_is_named():
    """engines.yaml fp8_block_gemm: "" (the GEMM tables' DeepGEMM) in every shipped profile;
    flashinfer is accepted; anything else is refused, naming the field."""
    from estimators._engines import _build, _engines_yaml

    for name, versions in available_engines().items():
        assert all(load_engine(f"{name}@{v}").fp8_block_gemm == "" for v in versions)
    body = _engines_yaml()["sglang"]["profiles"]["0.5.4"]
    assert _build("sglang", "0.5.4", {**body, "fp8_block_gemm": "flashinfer"}).fp8_block_gemm
    with pytest.raises(ValueError, match="fp8_block_gemm 'cublas' is not one of"):
        _build("sglang", "0.5.4", {**body, "fp8_block_gemm": "cublas"})


def test_each_engine_runs_its_residual_adds_where_its_source_does():
    """engines.yaml fused_residual_add: Vidur's add kernels of their own, the serving
    engines' fused add + RMSNorm; a value that is not true or false is refused."""
    from estimators._engines import _build, _engines_yaml

    assert not load_engine("vidur").fused_residual_add
    for name in ("vllm@0.11", "vllm@0.13", "sglang@0.4", "sglang@0.5.4", "trtllm"):
        assert load_engine(name).fused_residual_add, name
    body = _engines_yaml()["trtllm"]["profiles"]["1.0"]
    with pytest.raises(ValueError, match="fused_residual_add 'yes' is not true or false"):
        _build("trtllm", "1.0", {**body, "fused_residual_add": "yes"})


@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_a_fused_residual_add_keeps_its_traffic_and_loses_its_launch(llama8b, h100, engine):
    """Each layer's two adds cost their bytes alone: exactly two elementwise fixed costs
    below the same adds in kernels of their own; no other operator moves."""
    batch = BatchShape(num_decodes=16, decode_kv_tokens=16 * 1024)
    profile = load_engine(engine)

    def ops(fused: bool):
        est = make_estimator(
            "roofline", llama8b, h100, 2, engine=replace(profile, fused_residual_add=fused)
        )
        return est.constants, est.operator_times(batch)

    c, own = ops(False)
    _, fused = ops(True)
    for op, t in own.items():
        saved = 2 * c.elementwise_overhead_us * 1e-6 if op == "add" else 0.0
        assert t - fused[op] == pytest.approx(saved, rel=1e-9, abs=1e-15), op
    assert fused["add"] > 0  # the adds' memory traffic stays


def test_sglang_fuses_deepseek_shared_experts_at_ep_1_unless_flashinfer_trtllm_runs_them():
    """engines.yaml shared_experts_fusion: SGLang's DeepseekV2ForCausalLM folds the shared
    expert into the routed experts' kernel, not under expert parallelism, not for other
    model_types, and not under the FlashInfer TRT-LLM MoE runner; the others never do."""
    from estimators._engines import _build, _engines_yaml

    sglang = load_engine("sglang")
    assert sglang.fuses_shared_experts("deepseek_v3", 1, "")
    assert not sglang.fuses_shared_experts("deepseek_v3", 8, "")
    assert not sglang.fuses_shared_experts("kimi_k2", 1, "")
    assert not sglang.fuses_shared_experts("deepseek_v3", 1, "sglang_flashinfer_trtllm_moe")
    for name in ("vllm", "trtllm", "vidur"):
        assert not load_engine(name).fuses_shared_experts("deepseek_v3", 1, ""), name
    body = _engines_yaml()["sglang"]["profiles"]["0.5.4"]
    with pytest.raises(ValueError, match="shared_experts_fusion has unknown keys"):
        _build("sglang", "0.5.4", {**body, "shared_experts_fusion": {"models": ["x"]}})


def test_a_fused_shared_expert_is_one_more_expert_every_token_picks(v3, h200):
    """Fused, DeepSeek-V3's shared expert leaves the layer's own GEMMs for the routed
    experts' grouped GEMMs: one more expert touched and one more row per token."""
    from estimators._moe import MoeShape
    from estimators._roofline import routed_experts_part

    sglang = load_engine("sglang")
    unfused = replace(sglang, shared_experts_fusion=None)
    fused = make_estimator("roofline", v3, h200, 8, precision=Precision.FP8, engine=sglang)
    apart = make_estimator("roofline", v3, h200, 8, precision=Precision.FP8, engine=unfused)
    assert fused._fused_shared == 1 and apart._fused_shared == 0
    assert "shared expert: inside the routed experts' kernel, 1 more" in fused.describe()
    assert "shared expert:" not in apart.describe()
    shared = {op.name for op in apart.layer_ops} - {op.name for op in fused.layer_ops}
    assert shared == {"shared_expert_up_proj", "shared_expert_act", "shared_expert_down_proj"}
    moe = MoeShape.of(v3, 8, 1)
    w = v3.matmul_weight_bytes(Precision.FP8)
    for m in (4.0, 64.0):
        t, _, _ = fused._routed_experts(m)
        rows, groups = moe.rows(m) + m, moe.touched(m) + 1
        assert t == pytest.approx(routed_experts_part(moe, rows, groups, w, fused._k_experts)[0])
        assert t > apart._routed_experts(m)[0]
    # at small decode batches the shared expert's own kernels cost more than its rows
    batch = BatchShape(num_decodes=8, decode_kv_tokens=8 * 2048)
    assert fused.batch_cost(batch).stage_times[0] < apart.batch_cost(batch).stage_times[0]


def test_a_shared_experts_stream_reads_its_bounds_and_refuses_bad_ones():
    from estimators._engines import SharedExpertsStream, _build, _engines_yaml

    body = _engines_yaml()["vllm"]["profiles"]["0.13"]
    assert _build("vllm", "0.13", body).shared_experts_stream == SharedExpertsStream(256)
    for bad, match in (({"max_tokens": -1}, "negative"), ({"tokens": 8}, "unknown keys"),
                       ({"graphed_only": "yes"}, "not true or false")):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            _build("vllm", "0.13", {**body, "shared_experts_stream": bad})
