"""`llmcap validate --modes disagg`: the silicon sample's prefill/decode rows."""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

from estimators import Precision
from search._validate import DatasetError, error_stats, load_aic_silicon, select_points
from search._validate._aic_disagg import NO_WORKER_COUNTS
from search._validate._report import prefill_load_band
from search._validate._run import deployment_for, engine_for, simulate_point, simulate_points
from search.cli import cli
from simulator import KvLink, SchedulerKind, prepare
from tests.search.conftest import needs_aic
from tests.search.silicon_rows import row as agg_row

# a disaggregated row as the silicon sample writes it (DeepSeek-R1 FP8 on B200, Dynamo with
# TensorRT-LLM): one prefill worker of 8 attention-DP ranks, one decode worker likewise
DISAGG = {
    "id": "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg666",
    "silicon_data_source": "db-dump/2026-04-27; config_id=666; silicon_concurrency=128; "
    "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post2",
    "backend": "trtllm", "backend_version": "0.8.1.post2",
    "model_path": "deepseek-ai/DeepSeek-R1", "system": "b200_sxm", "mode": "disagg",
    "isl": "8192", "osl": "1024", "gemm_quant_mode": "fp8",
    "batch_size": "", "tp_size": "", "pp_size": "", "attention_dp_size": "",
    "moe_tp_size": "", "moe_ep_size": "",
    "prefill_batch_size": "1", "prefill_num_workers": "1", "prefill_tp_size": "1",
    "prefill_pp_size": "1", "prefill_attention_dp_size": "8", "prefill_moe_tp_size": "8",
    "prefill_moe_ep_size": "1",
    "decode_batch_size": "16", "decode_num_workers": "1", "decode_tp_size": "1",
    "decode_pp_size": "1", "decode_attention_dp_size": "8", "decode_moe_tp_size": "1",
    "decode_moe_ep_size": "8",
    "silicon_ttft_ms": "1947.784445944626", "silicon_tpot_ms": "30.637100950865378",
}  # fmt: skip


def disagg(**overrides: str) -> dict[str, str]:
    return {**DISAGG, **overrides}


def test_a_disaggregated_row_maps_to_a_prefill_pool_and_a_decode_pool():
    selection = select_points([disagg()], models="all", modes="disagg")
    assert selection.skipped == {}
    [p] = selection.points
    assert (p.model, p.sku, p.engine, p.mode) == ("deepseek-ai/DeepSeek-V3", "b200", "trtllm",
                                                  "disagg")  # fmt: skip
    # prefill: the srt-slurm recipe's limits per attention-DP rank (B200 FP8 8k/1k: one
    # whole prompt of at most 8,320 tokens), not the row's placeholder prefill_batch_size
    assert (p.tp, p.dp, p.ep, p.replicas, p.batch_size) == (1, 8, 1, 1, 1)
    assert (p.token_budget, p.scheduler) == (8320, "orca")
    d = p.decode
    # decode: the recipe's batch cap per rank (ctx1_gen1_dep8_batch128_eplb0_mtp0_128), not
    # the row's even share of the 128 clients over 8 ranks (16)
    assert (d.tp, d.dp, d.ep, d.replicas, d.batch_size) == (1, 8, 8, 1, 128)
    assert (p.concurrency, p.isl, p.osl, p.length_ratio) == (128, 8192, 1024, 0.8)
    assert p.engine_version == ""  # 0.8.1.post2 is Dynamo's release, not TensorRT-LLM's
    assert (p.measured_ttft_ms, p.measured_tpot_ms) == (1947.784445944626, 30.637100950865378)


def test_the_deployment_has_both_pools_with_the_decode_rows_batch_cap():
    [p] = select_points([disagg(prefill_num_workers="2")], models="all", modes="disagg").points
    d = deployment_for(p)
    assert (d.tp, d.dp, d.ep, d.num_replicas) == (1, 8, 1, 2)
    # the recipe's prefill limits over the 8 attention-DP ranks: 8 whole prompts, 66,560 tokens
    assert (d.scheduler.kind, d.scheduler.batch_size, d.scheduler.max_tokens) == (
        SchedulerKind.ORCA, 8, 8 * 8320)
    assert (d.decode.tp, d.decode.dp, d.decode.ep, d.decode.num_replicas) == (1, 8, 8, 1)
    assert d.decode.scheduler.batch_size == 128  # 16 per decode DP rank
    assert d.decode.link is KvLink.AUTO and d.num_gpus == 24
    prepared = prepare(d)  # 16 prefill + 8 decode GPUs: more than a node, over the network
    b200 = d.sku.default_node
    per_gpu = prepared.memory.kv_bytes_per_token
    assert prepared.decode_pool.transfer_seconds_per_token == pytest.approx(
        per_gpu / (b200.inter_node_bandwidth_gbps * 1e9)
    )


def test_nvidias_tensorrt_llm_prefill_workers_take_the_generators_limit_and_whole_contexts():
    """NVIDIA's own disaggregated runs: aiconfigurator's generator gives a prefill worker
    max_num_tokens ISL + 1500 rounded up to 32, chunked context off; the public dump's
    DeepSeek points take their srt-slurm recipes' (the test below)."""
    own = disagg(id="nvidia_qwen3_32b_disagg_15000x500_c480",
                 silicon_data_source="source_file=x.csv; silicon_concurrency=16",
                 backend_version="",
                 model_path="Qwen/Qwen3-32B", isl="15000", osl="500",
                 prefill_attention_dp_size="1", prefill_tp_size="2", prefill_moe_tp_size="",
                 decode_attention_dp_size="1", decode_tp_size="2", decode_moe_ep_size="",
                 decode_batch_size="16")  # fmt: skip
    [nvidia, public] = select_points([own, disagg()], models="all", modes="disagg").points
    assert (nvidia.token_budget, nvidia.scheduler) == (16512, "orca")  # 16500 rounded up
    prefill = deployment_for(nvidia).scheduler
    assert (prefill.kind.value, prefill.max_tokens) == ("orca", 16512)
    assert (public.token_budget, public.scheduler) == (8320, "orca")


def test_sglangs_gb200_recipes_exchange_moe_tokens_by_all_to_all():
    """SGLang's GB200 recipes launch with moe-a2a-backend deepep, its B200 ones without;
    TensorRT-LLM keeps its own rule."""
    rows = [
        disagg(backend="sglang", backend_version="0.5.8", system="gb200"),
        disagg(backend="sglang", backend_version="0.5.8"),
        disagg(system="gb200"),
    ]
    gb200, b200, trt = select_points(rows, models="all", modes="disagg").points
    assert gb200.moe_all_to_all == "always" and b200.moe_all_to_all == trt.moe_all_to_all == ""
    assert deployment_for(gb200).engine.moe_all_to_all == "always"
    assert deployment_for(b200).engine.moe_all_to_all == "never"
    assert deployment_for(trt).engine.moe_all_to_all == "above_top_k"


def test_sglangs_blackwell_recipes_run_flashinfer_trtllm_moe_without_shared_experts_fusion():
    """The srt-slurm recipes run DeepSeek-R1 on Blackwell with moe-runner-backend
    flashinfer_trtllm, which turns SGLang's shared-experts fusion off; on H200 SGLang keeps
    its default runner and fuses the shared expert where EP is 1."""
    tp8 = {"prefill_tp_size": "8", "prefill_attention_dp_size": "1", "prefill_moe_tp_size": "8",
           "prefill_moe_ep_size": "1", "decode_tp_size": "8", "decode_attention_dp_size": "1",
           "decode_moe_tp_size": "8", "decode_moe_ep_size": "1"}  # fmt: skip
    rows = [
        disagg(backend="sglang", backend_version="0.5.8", **tp8),
        disagg(backend="sglang", backend_version="0.5.8", system="gb200", **tp8),
        disagg(backend="sglang", backend_version="0.5.8", system="h200_sxm", **tp8),
    ]
    b200, gb200, h200 = select_points(rows, models="all", modes="disagg").points
    assert b200.moe_kernel == gb200.moe_kernel == "flashinfer_trtllm" and h200.moe_kernel == ""
    for point, fused in ((b200, 0), (gb200, 0), (h200, 1)):
        prepared = prepare(deployment_for(point))
        assert prepared.estimator._fused_shared == fused, point.sku
        assert prepared.decode_pool.estimator._fused_shared == fused, point.sku


def test_sglangs_blackwell_recipes_keep_an_fp8_kv_cache_and_gb200_low_latency_ones_poll():
    """Every SGLang DeepSeek-R1 recipe for B200 and GB200 starts both pools with an FP8 KV
    cache (its H200 ones keep the model's dtype); the GB200 low-latency recipes, whose
    decode pool runs without attention DP, take in new requests every 10 decode
    iterations on both pools; TensorRT-LLM's srt-slurm recipes set an FP8 KV cache too
    (its own default, following DeepSeek-R1's checkpoint, would be 16-bit)."""
    tp4 = {"prefill_tp_size": "4", "prefill_attention_dp_size": "1", "prefill_moe_tp_size": "4",
           "prefill_moe_ep_size": "1", "decode_tp_size": "4", "decode_attention_dp_size": "1",
           "decode_moe_tp_size": "4", "decode_moe_ep_size": "1"}  # fmt: skip
    rows = [
        disagg(backend="sglang", backend_version="0.5.8", system="gb200", **tp4),
        disagg(backend="sglang", backend_version="0.5.8", system="gb200"),  # attention DP
        disagg(backend="sglang", backend_version="0.5.8"),
        disagg(backend="sglang", backend_version="0.5.8", system="h200_sxm", **tp4),
        disagg(system="gb200", **tp4),
    ]
    low_latency, gb200, b200, h200, trt = select_points(rows, models="all", modes="disagg").points
    assert {p.kv_cache_dtype for p in (low_latency, gb200, b200)} == {Precision.FP8}
    assert h200.kv_cache_dtype is None and trt.kv_cache_dtype is Precision.FP8
    assert (low_latency.recv_interval, low_latency.decode.recv_interval) == (10, 10)
    for point in (gb200, b200, h200, trt):
        assert (point.recv_interval, point.decode.recv_interval) == (1, 1)
    d = deployment_for(low_latency)
    assert d.kv_precision is Precision.FP8
    assert (d.scheduler.recv_interval, d.decode.scheduler.recv_interval) == (10, 10)
    assert deployment_for(h200).resolved_kv_precision() is Precision.BF16


def test_sglangs_deepep_workers_run_expert_parallel_over_all_their_gpus():
    """Under DeepEP SGLang sets ep_size = tp_size (its tp_size: every GPU of the worker), so
    an attention-DP pool recorded with EP 1 (the 0.5.5.post2 rows) runs EP = its GPUs; a
    pool without attention DP, and SGLang without DeepEP (B200), keep the row's layout."""
    recorded_ep1 = {"prefill_moe_ep_size": "1", "prefill_moe_tp_size": "8",
                    "decode_attention_dp_size": "32", "decode_moe_tp_size": "32",
                    "decode_moe_ep_size": "1"}  # fmt: skip
    tp_prefill = {"prefill_tp_size": "4", "prefill_attention_dp_size": "1",
                  "prefill_moe_tp_size": "4", "prefill_moe_ep_size": "1"}  # fmt: skip
    rows = [
        disagg(backend="sglang", backend_version="0.5.5.post2", system="gb200", **recorded_ep1),
        disagg(backend="sglang", backend_version="0.5.5.post2", system="gb200",
               **{**recorded_ep1, **tp_prefill}),
        disagg(backend="sglang", backend_version="0.5.8", **recorded_ep1),
    ]  # fmt: skip
    gb200, gb200_tp_prefill, b200 = select_points(rows, models="all", modes="disagg").points
    assert (gb200.dp, gb200.ep, gb200.decode.dp, gb200.decode.ep) == (8, 8, 32, 32)
    assert (gb200_tp_prefill.tp, gb200_tp_prefill.ep, gb200_tp_prefill.decode.ep) == (4, 1, 32)
    assert (b200.ep, b200.decode.ep) == (1, 1)
    d = deployment_for(gb200)
    assert (d.ep, d.decode.ep) == (8, 32)


def test_dynamo_fronted_rows_route_decodes_round_robin():
    """Rows run from a Dynamo image, SGLang's srt-slurm runs (a Dynamo frontend by default)
    and NVIDIA's own runs (`aiconfigurator eval` serves behind Dynamo) route decode workers
    round-robin, with the engine's own HTTP server off the path; vLLM rows from vLLM's own
    image, naming no frontend, keep the least-outstanding default and vLLM's server."""
    db = "db-dump/2026-04-27; config_id=1; silicon_concurrency=128; "
    rows = [
        disagg(),  # ai-dynamo/tensorrtllm-runtime
        disagg(backend="sglang", backend_version="0.5.8",
               silicon_data_source=db + "lmsysorg/sglang:v0.5.8-cu130"),
        disagg(backend="vllm", backend_version="0.12.0",
               silicon_data_source=db + "image=nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.8.0"),
        disagg(backend="vllm", backend_version="0.18.0",
               silicon_data_source=db + "vllm/vllm-openai:v0.18.0-cu130"),
        # the enroot reference a Slurm job writes for the same NGC image
        disagg(backend="vllm", backend_version="0.12.0", silicon_ttft_ms="1000",
               silicon_data_source=db + "image=nvcr.io#nvidia/ai-dynamo/vllm-runtime:0.8.0"),
        disagg(backend="vllm", backend_version="0.12.0", silicon_ttft_ms="1100",
               silicon_data_source="source_file=x.csv; silicon_concurrency=128"),
    ]  # fmt: skip
    points = select_points(rows, models="all", modes="disagg").points
    routers = [p.decode_router for p in points]
    assert routers == ["round_robin"] * 3 + ["lor"] + ["round_robin"] * 2
    assert [deployment_for(p).decode.router.value for p in points] == routers
    assert [p.frontend for p in points] == ["dynamo"] * 3 + [""] + ["dynamo"] * 2
    behind, own_server = points[2], points[3]  # vLLM behind Dynamo, vLLM's own image
    assert engine_for(behind).frontend.request_ms == 0.0
    assert not engine_for(behind).disagg_decode_tokenizes
    assert engine_for(own_server).frontend.request_ms > 0.0
    assert engine_for(own_server).disagg_decode_tokenizes


def test_modes_select_the_aggregated_the_disaggregated_or_both():
    agg = {**DISAGG, "mode": "agg", "tp_size": "8", "pp_size": "1", "moe_ep_size": "8",
           "moe_tp_size": "1", "attention_dp_size": "1"}  # fmt: skip
    rows = [agg, disagg()]
    by_mode = {m: select_points(rows, models="all", modes=m) for m in ("agg", "disagg", "all")}
    assert [q.mode for q in by_mode["agg"].points] == ["agg"]
    assert by_mode["agg"].skipped == {"disaggregated (prefill/decode pools)": 1}
    assert [q.mode for q in by_mode["disagg"].points] == ["disagg"]
    assert by_mode["disagg"].skipped == {"aggregated (not in --modes disagg)": 1}
    assert [q.mode for q in by_mode["all"].points] == ["agg", "disagg"]
    with pytest.raises(ValueError, match="modes must be one of agg, disagg, all"):
        select_points(rows, modes="pd")


def test_disaggregated_rows_llmcap_cannot_represent_are_counted_by_reason():
    rows = [
        disagg(prefill_num_workers="", decode_num_workers=""),
        disagg(system="gb300"),
        disagg(decode_tp_size="16", decode_attention_dp_size="1", decode_moe_ep_size="16"),
        disagg(decode_moe_ep_size="4"),
        disagg(prefill_pp_size="2"),
        disagg(),
    ]
    selection = select_points(rows, models="all", modes="disagg")
    assert len(selection.points) == 1
    assert selection.skipped == {
        NO_WORKER_COUNTS: 1,
        "GPU not in the catalog (gb300)": 1,
        "TP beyond one node (decode_tp_size > 8 GPUs)": 1,
        "MoE TP x EP differs from attention DP x TP": 1,
        "pipeline parallelism in a disaggregated pool": 1,
    }


def test_a_malformed_pool_field_names_the_file_line_and_field():
    with pytest.raises(DatasetError, match=r"data.csv line 2: field decode_num_workers .*'x'"):
        select_points([disagg(decode_num_workers="x")], "data.csv", "all", "disagg")
    with pytest.raises(DatasetError, match=r"field prefill_tp_size must be a positive"):
        select_points([disagg(prefill_tp_size="-1")], "data.csv", "all", "disagg")


def test_a_bad_modes_option_exits_2_naming_it():
    result = CliRunner().invoke(cli, ["validate", "--modes", "pd", "--no-aic"])
    assert result.exit_code == 2 and "--modes" in result.output


@needs_aic
def test_the_installed_disaggregated_points_and_a_subsets_error_bound():
    selection = load_aic_silicon("all", "disagg")
    # aiconfigurator-core 0.12.0: 92 DeepSeek-V3/R1 FP8 points, 108 NVFP4 ones
    assert len(selection.points) == 200
    assert selection.skipped[NO_WORKER_COUNTS] == 1088
    points = [p for p in selection.points if not p.four_bit]
    assert len(points) == 92
    assert {p.sku for p in points} == {"h200", "b200", "gb200"}
    # every sixth H200/B200 point (the 33 GB200 ones, scored since the catalog has GB200,
    # are not in this guard), two requests per slot (a short run: less queueing than the
    # client's ten): TPOT within 25% MAPE (the full run: 16%), TTFT within 75% (the full
    # run: 58%, predicted too fast; docs/validation.md)
    subset = [p for p in points if p.sku != "gb200"][::6]
    results = simulate_points(subset, requests_per_slot=2, workers=1)
    assert all(r.ok for r in results)
    tpot = error_stats([r.predicted_tpot_ms for r in results],
                       [r.point.measured_tpot_ms for r in results])  # fmt: skip
    ttft = error_stats([r.predicted_ttft_ms for r in results],
                       [r.point.measured_ttft_ms for r in results])  # fmt: skip
    assert tpot.n == len(subset) == 10
    assert tpot.mape < 0.25
    assert ttft.mape < 0.75


def test_each_pool_takes_the_estimator_asked_for_at_its_own_shape(monkeypatch):
    """`--estimator auto|profiled` reaches both pools of a disaggregated point, each built at
    its own GPUs and parallelism and reading the tables of the point's engine release."""
    import search._validate._run as run
    import simulator._deployment as deployment

    built = []
    real = deployment.make_estimator

    def recording(backend, model, sku, tp, pp, precision, **kw):
        built.append((backend, sku.id, tp, kw["dp"], kw["ep"], kw["engine_version"]))
        return real(backend, model, sku, tp, pp, precision, **kw)

    monkeypatch.setattr(deployment, "make_estimator", recording)
    row = disagg(backend="sglang", backend_version="0.5.8.post1",
                 silicon_data_source="db-dump/2026-04-27; silicon_concurrency=32; "
                 "lmsysorg/sglang:v0.5.8.post1-cu130-amd64",
                 prefill_attention_dp_size="1", prefill_tp_size="8", prefill_moe_ep_size="8",
                 prefill_moe_tp_size="1", decode_batch_size="4")  # fmt: skip
    [p] = select_points([row], models="all", modes="disagg").points
    result = run.simulate_point(p, 1, estimator="auto")
    assert result.ok and result.predicted_ttft_ms > 0
    assert built == [
        ("auto", "b200", 8, 1, 8, "0.5.8.post1"),  # the prefill pool
        ("auto", "b200", 1, 8, 8, "0.5.8.post1"),  # the decode pool
    ]


def test_the_public_tensorrt_llm_deepseek_rows_take_their_recipes_prefill_limits():
    """InferenceX's dynamo-trt DeepSeek-R1 runs launch srt-slurm recipes whose prefill
    workers batch at most a fixed number of whole prompts per attention-DP rank, by GPU,
    precision and prompt length; other engines' rows keep the engine's own limits."""
    def mapped(**overrides: str):
        [p] = select_points([disagg(**overrides)], models="all", modes="disagg").points
        return p.batch_size, p.token_budget, p.scheduler

    h200_1k = dict(system="h200_sxm", isl="1024", id="dsr1_h200_trtllm_fp8_disagg_1024x1024_c128")
    assert mapped(**h200_1k) == (8, 8192, "orca")
    assert mapped(system="h200_sxm") == (2, 16640, "orca")  # 8k/1k
    fp4 = dict(gemm_quant_mode="nvfp4", model_path="nvidia/DeepSeek-R1-FP4")
    assert mapped(**fp4) == (2, 16896, "orca")
    sglang = dict(backend="sglang", backend_version="0.5.8.post1",
                  silicon_data_source="db-dump/2026-04-27; silicon_concurrency=128; "
                  "lmsysorg/sglang:v0.5.8.post1-cu130-amd64")  # fmt: skip
    assert mapped(**sglang) == (0, 0, "")


def test_the_public_sglang_deepseek_rows_take_their_recipes_limits_per_dp_rank():
    """SGLang's srt-slurm recipes set each pool's chunked-prefill-size and
    max-running-requests for the whole worker, which SGLang divides over its attention-DP
    ranks, and max-prefill-tokens, which it does not: the B200 FP8 8k/1k max-tpt 1p-1d
    recipe (chunk 65536, 8192 prefill tokens, 8 and 256 running requests, DP 8 both
    pools) gives each rank 8192 tokens and one prompt, each decode rank 32 requests; a
    concurrency the recipe is not run at keeps the engine's limits and the row's share."""
    def mapped(concurrency: int):
        source = (f"db-dump/2026-04-27; config_id=641; silicon_concurrency={concurrency}; "
                  "lmsysorg/sglang:v0.5.8.post1-cu130-amd64")  # fmt: skip
        row = disagg(backend="sglang", backend_version="0.5.8.post1", silicon_data_source=source)
        [p] = select_points([row], models="all", modes="disagg").points
        assert p.decode is not None and p.concurrency == concurrency
        return p.token_budget, p.batch_size, p.decode.batch_size

    assert mapped(288) == (8192, 1, 32)
    assert mapped(128) == (0, 0, 16)


def test_sglang_fp8_recipes_that_turn_deepgemm_off_run_flashinfers_block_fp8_gemms():
    """The B200 tep8 recipes set SGLANG_ENABLE_JIT_DEEPGEMM false (SGLang 0.5.8 then picks
    FlashInfer's groupwise kernel on Blackwell) and the GB200 low-latency ones
    fp8-gemm-backend flashinfer_trtllm: both pools price those GEMMs at that kernel;
    NVIDIA's March B200 recipe keeps DeepGEMM, as does a concurrency no recipe names."""
    tep8 = {"prefill_tp_size": "8", "prefill_attention_dp_size": "1", "prefill_moe_tp_size": "1",
            "prefill_moe_ep_size": "8", "decode_tp_size": "8", "decode_attention_dp_size": "1",
            "decode_moe_tp_size": "1", "decode_moe_ep_size": "8"}  # fmt: skip
    tp4 = {"prefill_tp_size": "4", "prefill_attention_dp_size": "1", "prefill_moe_tp_size": "4",
           "prefill_moe_ep_size": "1", "decode_tp_size": "4", "decode_attention_dp_size": "1",
           "decode_moe_tp_size": "4", "decode_moe_ep_size": "1"}  # fmt: skip

    def row(concurrency: int, system: str = "b200_sxm", isl: str = "8192", **layout: str):
        source = (f"db-dump/2026-04-27; config_id=455; silicon_concurrency={concurrency}; "
                  "lmsysorg/sglang:v0.5.8.post1-cu130-amd64")  # fmt: skip
        return disagg(backend="sglang", backend_version="0.5.8.post1", system=system, isl=isl,
                      silicon_data_source=source, **layout)  # fmt: skip

    rows = [row(4, **tep8), row(8, **tep8), row(288), row(4, "gb200", "1024", **tp4)]
    b200, unnamed, march, gb200 = select_points(rows, models="all", modes="disagg").points
    assert b200.fp8_block_gemm == gb200.fp8_block_gemm == "flashinfer"
    assert unnamed.fp8_block_gemm == march.fp8_block_gemm == ""
    d = prepare(deployment_for(b200))
    assert d.estimator.fp8_block_gemm == d.decode_pool.estimator.fp8_block_gemm == "flashinfer"
    assert prepare(deployment_for(march)).estimator.fp8_block_gemm == ""


def test_the_public_tensorrt_llm_deepseek_rows_take_their_recipes_decode_batch_cap():
    """Each srt-slurm recipe sets its decode workers' max_batch_size and names the
    concurrencies it runs at: a row it matches (GPU, precision, lengths, worker counts,
    decode layout, concurrency) takes that cap per rank, below the row's even share or far
    above it; a row no recipe matches keeps the even share it records."""
    def decode_cap(concurrency: int, **overrides: str) -> int:
        source = DISAGG["silicon_data_source"].replace("=128;", f"={concurrency};")
        row = disagg(silicon_data_source=source, **overrides)
        [p] = select_points([row], models="all", modes="disagg").points
        assert p.decode is not None and p.concurrency == concurrency
        return p.decode.batch_size

    # GB200 FP8 1k/1k, three TP-8 decode workers for 27 clients: 8 each (ctx1_gen3_tep8_batch8
    # _eplb0_mtp0_27), where the row records 9, so three requests wait for a slot
    gb200 = dict(system="gb200", isl="1024", decode_num_workers="3", decode_tp_size="8",
                 decode_attention_dp_size="1", decode_moe_ep_size="8", decode_batch_size="9")
    assert decode_cap(27, **gb200) == 8
    # the same layout at a concurrency no recipe of it runs: the row's own
    assert decode_cap(30, **{**gb200, "decode_batch_size": "10"}) == 10
    # H200 1k/1k, nine TP-8 decode workers for 36 clients: 256 each, the row records 4
    h200 = dict(system="h200_sxm", isl="1024", decode_num_workers="9", decode_tp_size="8",
                decode_attention_dp_size="1", decode_moe_ep_size="8", decode_batch_size="4")
    assert decode_cap(36, **h200) == 256
    # another engine's row keeps the even share whatever its layout
    [p] = select_points([disagg(backend="sglang", backend_version="0.5.8.post1",
                                silicon_data_source="db-dump/2026-04-27; silicon_concurrency="
                                "128; lmsysorg/sglang:v0.5.8.post1-cu130-amd64")],
                        models="all", modes="disagg").points  # fmt: skip
    assert p.decode is not None and p.decode.batch_size == 16


def test_a_disaggregated_point_reports_how_busy_its_simulated_prefill_pool_was():
    """`predicted_prefill_busy`: the prefill pool's mean busy share of the run, more of it at
    a higher concurrency of the same deployment; the report bands it (the group table "by
    simulated prefill load"), and an aggregated point has none."""
    def busy(concurrency: str) -> float:
        row = disagg(id=f"dsr1_b200_trtllm_fp8_disagg_8192x1024_c{concurrency}_cfg666",
                     silicon_data_source="db-dump/2026-04-27; config_id=666; "
                     f"silicon_concurrency={concurrency}; "
                     "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post2")  # fmt: skip
        [p] = select_points([row], models="all", modes="disagg").points
        result = simulate_point(p, requests_per_slot=2)
        assert result.ok
        return result.predicted_prefill_busy

    light, heavy = busy("4"), busy("128")
    assert 0.0 < light < heavy <= 1.0
    [aggregated] = select_points([agg_row()], models="all", modes="agg").points
    alone = simulate_point(aggregated, requests_per_slot=2)
    assert alone.ok and math.isnan(alone.predicted_prefill_busy)
    assert [prefill_load_band(x) for x in (0.2, 0.5, 0.7, 0.9, 0.99, math.nan)] == [
        "0-50%", "0-50%", "50-80%", "80-95%", "95-100%", "aggregated"
    ]
