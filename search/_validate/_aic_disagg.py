"""Disaggregated rows of the aic-silicon dataset: a prefill pool and a decode pool.

A `mode=disagg` row of silicon_sample.csv describes a Dynamo-style deployment: prefill
workers (`prefill_num_workers` of `prefill_attention_dp_size` x `prefill_tp_size` GPUs,
experts over `prefill_moe_ep_size` x `prefill_moe_tp_size` of them) hand each prompt's KV
cache to decode workers (the `decode_*` columns likewise), measured by the same closed-loop
client as the aggregated rows (`_aic_silicon.py`): mean TTFT (the first token the client
receives: Dynamo's frontend and SGLang's router stream the decode worker, engines.yaml
`disagg_first_token`) and mean TPOT at concurrency C.

`decode_batch_size` is C / (workers x DP) on every row of 0.12.0 (267 of 267 with a
concurrency), the even share of the client's requests, and llmcap takes it as each decode
worker's batch cap per attention DP rank where it knows no other (the public TensorRT-LLM
rows take their launch recipe's, below).  `prefill_batch_size` is 1 on every row (274 of
274), also where the launch recipe lets a prefill worker batch thousands of requests
(NVIDIA/srt-slurm recipes/gb200-fp8/1k1k/max-tpt.yaml, the DeepSeek-R1 SGLang GB200
configuration measured at concurrency 1,024-6,144: max-running-requests 30,000,
chunked-prefill-size 131,072): a placeholder, not a limit, so the prefill pool keeps the
engine's own limits (capped at C).  Read as one prompt per rank, it starved the prefill
pools at high concurrency (TTFT predicted up to 10x the measured).

`backend_version` of a TensorRT-LLM row run from a Dynamo image
(`nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post1`) is the Dynamo release, not
TensorRT-LLM's; those images ship TensorRT-LLM 1.x, so the point takes the TensorRT-LLM
profile that covers 1.x (the engine's default) rather than a version of Dynamo's.

SGLang's GB200 DeepSeek-R1 recipes (NVIDIA/srt-slurm recipes/gb200-fp8/1k1k/max-tpt.yaml,
1k1k/mid-curve.yaml, 8k1k/max_tpt.yaml) launch both pools with ``moe-a2a-backend: deepep``
(normal kernels on prefill, low-latency on decode), not SGLang's default all-gather, so the
points of SGLang on GB200 with attention DP exchange tokens by all-to-all
(`ValidationPoint.moe_all_to_all`); its B200 recipes (recipes/b200-fp8/8k1k_stp_maxtpt_0.yaml)
keep the default.

Those recipes also give each attention-DP worker expert parallelism over all its GPUs
(``tp-size``, ``dp-size`` and ``ep-size`` alike: 4/4/4 prefill and 32 or 48 decode in
recipes/gb200-fp4/1k1k/max-tpt.yaml and mid-curve.yaml, 8/8/8 and 32 in
ishandhanani/srt-slurm recipes/gb200-fp8/1k8k/max-tpt.yaml, run on the v0.5.5.post2
image), and SGLang enforces it: under ``--moe-a2a-backend deepep`` its server arguments set
``ep_size = tp_size`` (ServerArgs._handle_a2a_moe, "The expert parallel size is adjusted to
be the same as the tensor parallel size").  The 0.5.5.post2 rows record ``moe_ep_size`` 1 with
``moe_tp_size`` = DP (every expert split 32 ways), not the layout those recipes launch:
an attention-DP pool of these points takes EP = its GPUs.

The frontend picks each request's decode worker (`ValidationPoint.decode_router`).  NVIDIA
Dynamo's frontend routes round-robin unless launched with another `--router-mode` (Dynamo
docs, Router Guide: `--router-mode` default round-robin), whatever each worker's load: in a
closed loop whose output lengths vary a request can wait for a batch slot on a busy worker
while another idles.  The rows run from a Dynamo runtime image (`nvcr.io/nvidia/ai-dynamo/
tensorrtllm-runtime`, `sglang-runtime`, `vllm-runtime` in silicon_data_source) are routed so.
So are SGLang's rows from stock `lmsysorg/sglang` images: they are the srt-slurm recipes'
runs (above), and srt-slurm launches a Dynamo frontend by default (`frontend: type: dynamo`
in recipes/gb200-fp8/1k1k/max-tpt.yaml, low-latency.yaml; `python3 -m dynamo.frontend` with
no router mode, src/srtctl/frontends/dynamo.py), Dynamo installed when the workers start.
So are NVIDIA's own runs (`aic-collection`), which `aiconfigurator eval` starts behind
Dynamo's frontend (`_aic_generator.py`).  vLLM's Kimi-K2.5 rows from `vllm/vllm-openai`
images name no frontend: they keep llmcap's least-outstanding routing.  Behind Dynamo's
frontend (`ValidationPoint.frontend`), the engine's own HTTP server is not on the path:
Dynamo tokenizes the prompt once and hands the workers token ids.

Every one of those recipes that runs DeepSeek-R1 on Blackwell (recipes/b200-fp4/1k1k.yaml,
recipes/gb200-fp8/1k1k/low-latency.yaml, both pools) sets ``moe-runner-backend:
flashinfer_trtllm``, under which SGLang turns its shared-experts fusion off (engines.yaml
`shared_experts_fusion`), as the aggregated points' B200 scripts do
(`_launch_scripts.py`): those points take that kernel (`ValidationPoint.moe_kernel`).

Every SGLang DeepSeek-R1 recipe for B200 and GB200 in NVIDIA/srt-slurm (recipes/b200-fp8/,
b200-fp4/, gb200-fp8/, gb200-fp4/: each file, each variant, read 2026-11-29) starts both
pools with ``kv-cache-dtype: fp8_e4m3``, against SGLang's default of the model's dtype: those
points keep an FP8 KV cache (`ValidationPoint.kv_cache_dtype`; its bytes are what the
transfer moves).  Its H200 recipes (recipes/h200/8k1k/) set none.  The GB200 low-latency
recipes (gb200-fp8/1k1k/low-latency.yaml, 8k1k/low-latency.yaml, gb200-fp4/1k1k/ and
8k1k/low-latency.yaml), the GB200 recipes whose decode pool runs without attention DP,
also set ``scheduler-recv-interval: 10`` on both pools, and no other recipe sets it: each
pool's scheduler then takes in new requests every 10 decode iterations
(`ValidationPoint.recv_interval`, `PoolShape.recv_interval`), the decode pool's before it
reserves their KV (`simulator.Replica.reserve_when_polled`), so a prefill waits for it.

The public campaign's SGLang DeepSeek-R1 rows run those recipes' batching limits
(`SGLANG_RECIPES`; NVIDIA/srt-slurm, ishandhanani/srt-slurm and connorcarpenter15/srt-slurm
recipes/b200-fp4/, b200-fp8/, gb200-fp4/, gb200-fp8/, h200/, each row's recipe matched by GPU,
precision, prompt length, worker counts and each pool's TP, attention DP and EP, and by the
concurrencies the recipe names; read 2026-11-30): each pool's ``chunked-prefill-size`` and
``max-running-requests``, which SGLang divides over a worker's attention-DP ranks
(engines.yaml `dp_splits_token_budget`; the running requests in ModelRunner /
pool_configurator), and ``max-prefill-tokens``, which it does not (each rank's, 16384
unset).  So the B200 FP8 8k/1k attention-DP prefill workers of March 2026 (chunk 65536,
8192 prefill tokens, 8 running requests over 8 ranks) take one prompt a rank at a time,
and their decode workers the recipe's cap (32 to 128 a rank), not the row's even share.
Where both pools' ``mem-fraction-static`` were read, each pool takes its own
(`PoolShape.memory_fraction`, `simulator.DecodeSpec.gpu_memory_utilization`): the H200
bs128-1p1d-dep recipe's 163840-token chunk needs its 0.75 (0.88 on decode), SGLang's own
formula for the fraction leaving nothing at that chunk; likewise GB200 FP4 8k/1k max-tpt
(131072 tokens, 0.95 / 0.83), B200 FP8 8k/1k of March (0.6 / 0.75) and the other B200
recipes (0.85 both).  Where no stored
recipe matches a row's layout (the December 2025 GB200 rows with attention DP on both
pools, or recording attention DP where their recipe runs none; the B200 FP8 2p-1d layout of
February) or its concurrency (GB200 FP4 1k/1k at 12,000), the pools keep the engine's own
limits.

Some of those FP8 recipes move the checkpoint's block-FP8 dense GEMMs (attention projections,
shared experts, dense MLPs) off DeepGEMM, in both pools (`SglangRecipe.fp8_block_gemm`, read
2026-11-30).  The GB200 low-latency recipes (ishandhanani/srt-slurm recipes/gb200-fp8/1k1k/
low-latency.yaml, 8k1k/low-latency.yaml) say so outright: ``fp8-gemm-backend:
flashinfer_trtllm``.  The B200 recipes (recipes/b200-fp8/1k1k.yaml, 1k1k-stp.yaml,
8k1k-stp.yaml, 8k1k/stp/max-tpt-dep8-1p1d.yaml) set ``SGLANG_ENABLE_JIT_DEEPGEMM: "false"``,
and SGLang's automatic choice (``fp8_utils._dispatch_auto_backend`` in 0.5.8, these rows'
version) then takes FlashInfer's groupwise kernel on a Blackwell GPU with FlashInfer, before
CUTLASS or Triton: the kernel `_launch_scripts.py` gives the aggregated FP8 B200 points.  The
others leave DeepGEMM on: NVIDIA/srt-slurm's March 2026 recipes/b200-fp8/8k1k.yaml and the
GB200 max-tpt, ultra-tpt and mid-curve recipes, whose DeepEP workers set only
``SGLANG_JIT_DEEPGEMM_FAST_WARMUP``.

The public campaign's TensorRT-LLM DeepSeek-R1 rows (`benchmark-db`, run from a Dynamo
image) were launched by InferenceX's dynamo-trt jobs, which hand srtctl a recipe
(`CONFIG_FILE=recipes/trtllm/<gpu>-<precision>/<isl>k<osl>k/stp/...` in SemiAnalysisAI/
InferenceX .github/configs/nvidia-master.yaml; the recipes of ishandhanani/srt-slurm's
sa-submission-q1-2026 branch, read 2026-11-29 where that index holds them and in a fork's
complete copy, connorcarpenter15/srt-slurm@5a156f6b, whose prefill sections match every
pair compared).  Within a GPU, precision and prompt length every recipe gives its prefill
workers one ``max_batch_size`` and ``max_num_tokens`` per attention-DP rank, whatever the
concurrency, and none turns chunked context on (`TRTLLM_PREFILL_RECIPES`): whole prompts,
at most that many an iteration.  Elsewhere the prefill pool keeps the engine's own limits.
Their decode workers' ``max_batch_size`` is the recipe's own, one per recipe, and a recipe
names the concurrencies it is run at (``benchmark.concurrencies``): the rows of the 83
``stp`` recipes for GB200, B200 and H200 (connorcarpenter15/srt-slurm@5a156f6b, every file
read 2026-11-30) match 85 of the campaign's 138 TensorRT-LLM DeepSeek-R1 rows by GPU,
precision, lengths, worker counts, decode layout and concurrency (`TRTLLM_DECODE_RECIPES`),
and their caps are not the even share the rows record: 256 a rank where the H200 1k/1k rows
record 4 to 64 (``c4_ctx1_gen9_tep8_batch256``, concurrency 36), but 8 where GB200 FP8's
three TP-8 decode workers serve 27 clients (``ctx1_gen3_tep8_batch8_eplb0_mtp0_27``; the row
records 9), so three requests at a time wait for a batch slot, as they did: those rows
measure 1.6-7 s TTFT where prefill takes a few hundred milliseconds.  Rows the recipes do
not match (another recipe generation, e.g. the December 2025 GB200 FP4 rows with a TP-4
prefill worker) keep the row's even share.  Every recipe opened (six, over GB200, B200 and
H200, FP8 and FP4) sets ``kv_cache_config: dtype: fp8`` on both pools, where TensorRT-LLM's
own default follows the checkpoint and DeepSeek-R1's FP8 blocks declare no KV quantisation
(16-bit, engines.yaml `kv_precision_fp8_weights`): these rows keep an FP8 KV cache.
Two things those recipes also set are not modelled: ``disable_overlap_scheduler: true`` on
every prefill worker (the pool keeps the engine profile's host overlap, as for NVIDIA's own
runs, `_aic_generator.py`), and attention DP on H200 1k/1k prefill workers that the rows
record as TP 8 (the row's layout is kept: the rows record that deployment both ways, and
its TP 8 and DP 8 records measure alike, e.g. 673 and 623 ms at concurrency 36).

Rows without worker counts are skipped: the P:D ratio decides the throughput at load, and
llmcap does not guess it.  Everything else is skipped for the aggregated rows' reasons,
per pool.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from estimators import FP8_BLOCK_GEMM_FLASHINFER, MOE_ALL_TO_ALL_ALWAYS, Precision
from search._validate._aic_generator import generated_options
from search._validate._aic_silicon import (
    DYNAMO_FRONTEND,
    PoolShape,
    ValidationPoint,
    _int,
    dynamo_frontend,
    dynamo_image,
    measured_point,
    parallelism,
    row_basics,
    sku_family,
)
from search._validate._launch_scripts import DEEPSEEK, SGLANG_BLACKWELL_DEEPSEEK_MOE

# the prefill workers' (max_batch_size, max_num_tokens) per attention-DP rank in the
# srt-slurm TensorRT-LLM recipes of the public campaign's DeepSeek-R1 rows, by (GPU, 4-bit
# weights, prompt length); whole contexts (module docstring)
TRTLLM_PREFILL_RECIPES: dict[tuple[str, bool, int], tuple[int, int]] = {
    ("h200", False, 1024): (8, 8192),
    ("h200", False, 8192): (2, 16640),
    ("b200", False, 1024): (16, 16384),
    ("b200", False, 8192): (1, 8320),
    ("b200", True, 1024): (8, 10240),
    ("b200", True, 8192): (2, 16896),
    ("gb200", True, 1024): (16, 16384),  # 1k/1k and 1k/8k
    ("gb200", True, 8192): (2, 16640),
    ("gb200", False, 1024): (16, 16384),  # 1k/1k and 1k/8k
    ("gb200", False, 8192): (2, 16384),
}
# the decode workers' max_batch_size per attention-DP rank in the srt-slurm TensorRT-LLM
# recipes (stp) of the public campaign's DeepSeek-R1 rows, by (GPU, 4-bit weights, prompt and
# output length, prefill workers, decode workers, decode TP, decode attention DP), then by the
# concurrency a recipe is run at (module docstring)
TRTLLM_DECODE_RECIPES: dict[tuple[str, bool, int, int, int, int, int, int], dict[int, int]] = {
    ("b200", True, 1024, 1024, 1, 1, 1, 8): {4096: 512},
    ("b200", True, 1024, 1024, 1, 2, 1, 8): {2192: 128},
    ("b200", True, 1024, 1024, 1, 5, 1, 8): {1365: 32},
    ("b200", True, 1024, 1024, 1, 5, 8, 1): {
        6: 1, 10: 32, 15: 32, 25: 32, 45: 32, 90: 32, 180: 32,
    },
    ("b200", True, 1024, 1024, 1, 6, 8, 1): {450: 64},
    ("b200", True, 8192, 1024, 1, 5, 8, 1): {6: 1, 10: 16, 15: 16, 25: 16, 50: 16, 100: 16},
    ("b200", True, 8192, 1024, 2, 5, 8, 1): {370: 64},
    ("b200", True, 8192, 1024, 4, 1, 1, 8): {1606: 192},
    ("b200", True, 8192, 1024, 4, 3, 1, 8): {837: 32},
    ("b200", True, 8192, 1024, 7, 2, 1, 8): {2222: 128},
    ("b200", False, 1024, 1024, 1, 1, 1, 8): {4096: 512},
    ("b200", False, 1024, 1024, 1, 3, 8, 1): {4: 1, 32: 12, 128: 1024},
    ("b200", False, 1024, 1024, 1, 5, 1, 8): {1920: 48},
    ("b200", False, 1024, 1024, 2, 5, 1, 8): {5152: 128},
    ("b200", False, 8192, 1024, 1, 1, 1, 8): {128: 128, 256: 256},
    ("b200", False, 8192, 1024, 1, 1, 8, 1): {1: 1},
    ("b200", False, 8192, 1024, 1, 2, 1, 8): {128: 64},
    ("b200", False, 8192, 1024, 1, 4, 8, 1): {32: 8, 128: 32},
    ("b200", False, 8192, 1024, 1, 6, 8, 1): {96: 16},
    ("b200", False, 8192, 1024, 2, 1, 1, 8): {640: 640},
    ("gb200", True, 1024, 1024, 1, 1, 1, 8): {4301: 512},
    ("gb200", True, 1024, 1024, 1, 1, 1, 32): {666: 16},
    ("gb200", True, 1024, 1024, 1, 2, 1, 4): {6144: 768},
    ("gb200", True, 1024, 1024, 1, 4, 8, 1): {5: 1, 12: 32, 24: 32, 48: 32, 96: 32, 192: 32},
    ("gb200", True, 1024, 1024, 2, 1, 1, 16): {4301: 256},
    ("gb200", True, 1024, 1024, 2, 1, 1, 32): {2253: 64},
    ("gb200", True, 1024, 8192, 1, 1, 1, 32): {563: 16, 2048: 64, 4096: 128, 8192: 256},
    ("gb200", True, 1024, 8192, 1, 7, 8, 1): {7: 1},
    ("gb200", True, 1024, 8192, 1, 15, 4, 1): {60: 4, 135: 8},
    ("gb200", True, 8192, 1024, 1, 4, 8, 1): {5: 1, 12: 16, 44: 16, 76: 16},
    ("gb200", True, 8192, 1024, 2, 1, 1, 32): {333: 8},
    ("gb200", True, 8192, 1024, 7, 1, 1, 32): {1229: 32},
    ("gb200", True, 8192, 1024, 8, 1, 1, 16): {2253: 128},
    ("gb200", True, 8192, 1024, 10, 1, 1, 16): {4096: 256},
    ("gb200", False, 1024, 1024, 1, 1, 1, 8): {4301: 512, 6144: 768},
    ("gb200", False, 1024, 1024, 1, 1, 1, 16): {2151: 128},
    ("gb200", False, 1024, 1024, 1, 1, 1, 32): {256: 8, 1127: 32},
    ("gb200", False, 1024, 1024, 1, 3, 8, 1): {3: 1, 27: 8},
    ("gb200", False, 1024, 8192, 1, 1, 1, 32): {564: 16, 2048: 64},
    ("gb200", False, 1024, 8192, 1, 2, 1, 16): {8192: 256},
    ("gb200", False, 1024, 8192, 1, 4, 8, 1): {4: 1, 36: 8},
    ("gb200", False, 8192, 1024, 1, 3, 8, 1): {6: 1, 18: 4, 63: 16},
    ("gb200", False, 8192, 1024, 2, 1, 1, 32): {333: 8},
    ("gb200", False, 8192, 1024, 3, 1, 1, 16): {615: 32},
    ("gb200", False, 8192, 1024, 4, 1, 1, 32): {666: 16},
    ("gb200", False, 8192, 1024, 5, 1, 1, 16): {1229: 64},
    ("h200", False, 1024, 1024, 1, 6, 1, 8): {1536: 512},
    ("h200", False, 1024, 1024, 1, 9, 1, 8): {1152: 512},
    ("h200", False, 1024, 1024, 1, 9, 8, 1): {
        11: 1, 36: 256, 72: 256, 144: 256, 288: 256, 576: 256,
    },
    ("h200", False, 1024, 1024, 2, 7, 1, 8): {3584: 512},
    ("h200", False, 8192, 1024, 1, 1, 1, 8): {128: 256},
    ("h200", False, 8192, 1024, 1, 3, 8, 1): {48: 32},
    ("h200", False, 8192, 1024, 1, 6, 8, 1): {48: 16},
    ("h200", False, 8192, 1024, 1, 7, 8, 1): {9: 1, 28: 32},
    ("h200", False, 8192, 1024, 2, 3, 1, 8): {192: 128},
    ("h200", False, 8192, 1024, 2, 5, 8, 1): {160: 128},
    ("h200", False, 8192, 1024, 3, 1, 1, 8): {512: 512},
    ("h200", False, 8192, 1024, 5, 3, 1, 8): {768: 256},
}


class SglangRecipe(NamedTuple):
    """A srt-slurm SGLang recipe's batching limits, as written there (each pool's own
    server arguments: for the whole worker, which SGLang splits over its attention-DP ranks
    where it divides them; module docstring); 0 where the recipe leaves one unset."""

    prefill_chunk: int  # --chunked-prefill-size, divided over the DP ranks
    prefill_max_tokens: int  # --max-prefill-tokens, each rank's
    prefill_running: int  # --max-running-requests, divided over the DP ranks
    decode_running: int  # --max-running-requests, divided over the DP ranks
    concurrencies: tuple[int, ...]  # the concurrencies the recipe is run at
    # each pool's --mem-fraction-static (prefill, decode), where both were read; (0, 0): the
    # engine's own plan
    memory_fractions: tuple[float, float] = (0.0, 0.0)
    # the block-FP8 dense GEMM kernel both pools run, where the recipe moves it off DeepGEMM
    # (engines.yaml fp8_block_gemm; module docstring); "": DeepGEMM, SGLang's default
    fp8_block_gemm: str = ""


# the srt-slurm SGLang recipes of the public campaign's DeepSeek-R1 rows, by (GPU, 4-bit
# weights, prompt length, prefill workers, TP, attention DP, EP, decode workers, TP,
# attention DP), each row's recipe named, with the concurrencies it is run at (module
# docstring)
SGLANG_RECIPES: dict[tuple[str, bool, int, int, int, int, int, int, int, int], SglangRecipe] = {
    # b200-fp4/1k1k: max-tpt-dep4-1p-dep8-1d and -2d
    ("b200", True, 1024, 1, 1, 4, 4, 1, 1, 8): SglangRecipe(
        32768, 32768, 1024, 1024, (512,), (0.85, 0.85)
    ),
    ("b200", True, 1024, 1, 1, 4, 4, 2, 1, 8): SglangRecipe(
        32768, 32768, 512, 512, (512,), (0.85, 0.85)
    ),
    # b200-fp4/8k1k: low-latency-dep4-1p-tep8-1d, low-latency-tp4-1p-tp8-1d,
    # max-tpt-dep4-7p-dep8-2d
    ("b200", True, 8192, 1, 1, 4, 4, 1, 8, 1): SglangRecipe(32768, 32768, 512, 512, (64, 128)),
    ("b200", True, 8192, 1, 4, 1, 1, 1, 8, 1): SglangRecipe(32768, 32768, 512, 512, (4, 8, 16, 64)),
    ("b200", True, 8192, 7, 1, 4, 4, 2, 1, 8): SglangRecipe(65536, 65536, 1024, 2048, (1024, 2048)),
    # b200-fp8/1k1k and 8k1k-stp: low-latency-tep8-1p-1d, 1p-4d
    ("b200", False, 1024, 1, 8, 1, 8, 1, 8, 1): SglangRecipe(
        32768, 32768, 512, 512, (4,), fp8_block_gemm=FP8_BLOCK_GEMM_FLASHINFER
    ),
    ("b200", False, 8192, 1, 8, 1, 8, 1, 8, 1): SglangRecipe(
        32768, 32768, 512, 512, (4, 32, 64), (0.85, 0.85), FP8_BLOCK_GEMM_FLASHINFER
    ),
    ("b200", False, 8192, 1, 8, 1, 8, 4, 8, 1): SglangRecipe(
        32768, 32768, 512, 512, (64,), (0.85, 0.85), FP8_BLOCK_GEMM_FLASHINFER
    ),
    # b200-fp8/8k1k/stp/max-tpt-dep8-1p1d
    ("b200", False, 8192, 1, 1, 8, 8, 1, 1, 8): SglangRecipe(
        131072, 16384, 16, 1024, (128,), fp8_block_gemm=FP8_BLOCK_GEMM_FLASHINFER
    ),
    # b200-fp8/8k1k (its March 2026 version): low-latency-tp8-1p-4d, max-tpt-dep8-1p-1d,
    # 1p-2d, 2p-1d, 3p-1d
    ("b200", False, 8192, 1, 1, 8, 1, 4, 8, 1): SglangRecipe(
        65536, 8192, 8, 32, (128,), (0.6, 0.75)
    ),
    ("b200", False, 8192, 1, 1, 8, 1, 1, 1, 8): SglangRecipe(
        65536, 8192, 8, 256, (160, 288), (0.6, 0.75)
    ),
    ("b200", False, 8192, 1, 1, 8, 1, 2, 1, 8): SglangRecipe(
        65536, 8192, 8, 128, (288,), (0.6, 0.75)
    ),
    ("b200", False, 8192, 2, 1, 8, 1, 1, 1, 8): SglangRecipe(
        65536, 8192, 8, 512, (512,), (0.6, 0.75)
    ),
    ("b200", False, 8192, 3, 1, 8, 1, 1, 1, 8): SglangRecipe(
        65536, 8192, 8, 1024, (1024,), (0.6, 0.75)
    ),
    # gb200-fp4/1k1k: mid-curve, low-latency
    ("gb200", True, 1024, 4, 1, 4, 4, 1, 1, 32): SglangRecipe(
        65536, 32768, 30000, 67584, (512, 2048, 4096, 8192)
    ),
    ("gb200", True, 1024, 1, 4, 1, 1, 2, 4, 1): SglangRecipe(8192, 0, 512, 0, (4, 8, 32)),
    # gb200-fp4/8k1k: low-latency, max-tpt
    ("gb200", True, 8192, 1, 4, 1, 1, 4, 4, 1): SglangRecipe(24576, 0, 512, 0, (4, 8)),
    ("gb200", True, 8192, 10, 4, 1, 1, 1, 1, 32): SglangRecipe(  # max-tpt
        131072, 524288, 30000, 16384, (2048,), (0.95, 0.83)
    ),
    # gb200-fp8/1k1k: max-tpt, ultra-tpt, low-latency
    ("gb200", False, 1024, 2, 1, 8, 8, 1, 1, 32): SglangRecipe(
        131072, 0, 30000, 45000, (1024, 2048, 4096, 6144)
    ),
    ("gb200", False, 1024, 1, 1, 8, 8, 1, 1, 8): SglangRecipe(131072, 0, 8192, 5120, (4096,)),
    ("gb200", False, 1024, 1, 4, 1, 1, 1, 4, 1): SglangRecipe(
        8192, 0, 512, 128, (4, 8), fp8_block_gemm=FP8_BLOCK_GEMM_FLASHINFER
    ),
    # gb200-fp8/8k1k: mid-curve, low-latency (its 2025 version)
    ("gb200", False, 8192, 5, 1, 8, 8, 1, 1, 32): SglangRecipe(
        131072, 0, 30000, 8192, (512, 1024, 2048, 6144)
    ),
    ("gb200", False, 8192, 1, 8, 1, 1, 1, 8, 1): SglangRecipe(
        24576, 0, 512, 512, (4, 8, 16), fp8_block_gemm=FP8_BLOCK_GEMM_FLASHINFER
    ),
    # h200/8k1k: bs128-1p1d-dep
    ("h200", False, 8192, 1, 8, 1, 1, 1, 1, 8): SglangRecipe(
        163840, 163840, 16, 256, (64, 128, 256), (0.75, 0.88)
    ),
}
# SGLang's --max-prefill-tokens where a recipe leaves it unset (ServerArgs default)
SGLANG_DEFAULT_MAX_PREFILL_TOKENS = 16384
# the scheduler-recv-interval of SGLang's GB200 low-latency recipes (module docstring)
SGLANG_LOW_LATENCY_RECV_INTERVAL = 10
NO_WORKER_COUNTS = "disaggregated without worker counts (prefill/decode_num_workers empty)"


def map_disagg_row(row: dict[str, str], where: str, line: int) -> ValidationPoint | str:
    """The point of one disaggregated row, or why llmcap cannot represent it."""
    basics = row_basics(row)
    if isinstance(basics, str):
        return basics
    if (
        not (row.get("prefill_num_workers") or "").strip()
        or not (row.get("decode_num_workers") or "").strip()
    ):
        return NO_WORKER_COUNTS
    prefill = parallelism(row, "prefill_", basics, where, line)
    if isinstance(prefill, str):
        return prefill
    decode = parallelism(row, "decode_", basics, where, line)
    if isinstance(decode, str):
        return decode
    tp, pp, dp, ep = prefill
    d_tp, d_pp, d_dp, d_ep = decode
    if pp > 1 or d_pp > 1:
        return "pipeline parallelism in a disaggregated pool"
    deepep = basics.engine == "sglang" and basics.sku == "gb200" and max(dp, d_dp) > 1
    if deepep:  # SGLang's ep_size is its tp_size there (module docstring)
        ep, d_ep = _deepep_ep(tp, dp, ep), _deepep_ep(d_tp, d_dp, d_ep)
    sglang_blackwell_deepseek = (  # the recipes' MoE runner and KV dtype (module docstring)
        basics.engine == "sglang" and basics.model == DEEPSEEK
        and sku_family(basics.sku) == "blackwell"
    )  # fmt: skip
    dynamo = _behind_dynamo(row, basics.engine)  # its frontend and decode routing
    # SGLang's GB200 low-latency recipes: both pools poll every 10 decode iterations
    recv_interval = SGLANG_LOW_LATENCY_RECV_INTERVAL if (
        basics.engine == "sglang" and basics.sku == "gb200" and d_dp == 1
    ) else 1  # fmt: skip
    point = measured_point(
        row, basics, where, line,
        engine_version=_engine_version(row, basics.engine), tp=tp, pp=pp, dp=dp, ep=ep,
        moe_all_to_all=MOE_ALL_TO_ALL_ALWAYS if deepep else "",
        moe_kernel=SGLANG_BLACKWELL_DEEPSEEK_MOE if sglang_blackwell_deepseek else "",
        kv_cache_dtype=Precision.FP8 if sglang_blackwell_deepseek else None,
        recv_interval=recv_interval,
        frontend=DYNAMO_FRONTEND if dynamo else "",
        decode_router="round_robin" if dynamo else "lor",
        replicas=_int(row, "prefill_num_workers", where, line),
        batch_size=0,  # prefill_batch_size is a placeholder (module docstring)
        decode=PoolShape(
            tp=d_tp,
            replicas=_int(row, "decode_num_workers", where, line),
            dp=d_dp,
            ep=d_ep,
            batch_size=_int(row, "decode_batch_size", where, line, default=0),
            recv_interval=recv_interval,
        ),
    )  # fmt: skip
    sglang = _sglang_recipe(point)
    if sglang is not None:
        return _with_sglang_recipe(point, sglang)
    recipe = _trtllm_prefill_recipe(point, row)
    if recipe is not None:
        batch, tokens = recipe
        point = replace(point, batch_size=batch, token_budget=tokens, scheduler="orca",
                        kv_cache_dtype=Precision.FP8)  # fmt: skip
        return _with_trtllm_decode_recipe(point)
    return replace(point, **generated_options(point))  # NVIDIA's own runs (_aic_generator)


def _trtllm_prefill_recipe(point: ValidationPoint, row: dict[str, str]) -> tuple[int, int] | None:
    """The prefill workers' (batch cap, token budget) per attention-DP rank that the
    srt-slurm recipe of a public TensorRT-LLM DeepSeek-R1 row set (module docstring)."""
    if (
        point.engine != "trtllm"
        or point.source != "benchmark-db"
        or point.model != DEEPSEEK
        or not dynamo_image(row)
    ):
        return None
    return TRTLLM_PREFILL_RECIPES.get((point.sku, point.four_bit, point.isl))


def _with_trtllm_decode_recipe(point: ValidationPoint) -> ValidationPoint:
    """A public TensorRT-LLM DeepSeek-R1 point with its decode workers' batch cap per
    attention-DP rank from the srt-slurm recipe run at its layout and concurrency, or as the
    row records it where no recipe matches (module docstring)."""
    shape = point.decode
    assert shape is not None
    layout = (point.sku, point.four_bit, point.isl, point.osl, point.replicas,
              shape.replicas, shape.tp, shape.dp)  # fmt: skip
    batch = TRTLLM_DECODE_RECIPES.get(layout, {}).get(point.concurrency)
    return point if batch is None else replace(point, decode=replace(shape, batch_size=batch))


def _sglang_recipe(point: ValidationPoint) -> SglangRecipe | None:
    """The srt-slurm recipe of a public SGLang DeepSeek-R1 row (module docstring), or None."""
    shape = point.decode
    if point.engine != "sglang" or point.source != "benchmark-db" or shape is None:
        return None
    layout = (point.sku, point.four_bit, point.isl, point.replicas, point.tp, point.dp,
              point.ep, shape.replicas, shape.tp, shape.dp)  # fmt: skip
    recipe = SGLANG_RECIPES.get(layout)
    return recipe if recipe is not None and point.concurrency in recipe.concurrencies else None


def _with_sglang_recipe(point: ValidationPoint, recipe: SglangRecipe) -> ValidationPoint:
    """`point` with its recipe's limits per attention-DP rank: the chunk SGLang gives each
    rank (the recipe's over the DP ranks, at most its max-prefill-tokens) and the running
    requests of each pool's ranks (a decode pool whose recipe sets none keeps the row's),
    each pool's memory fraction where both were read, and the block-FP8 GEMM kernel where
    the recipe moves it off DeepGEMM."""
    shape = point.decode
    assert shape is not None
    max_tokens = recipe.prefill_max_tokens or SGLANG_DEFAULT_MAX_PREFILL_TOKENS
    budget = min(recipe.prefill_chunk // point.dp, max_tokens)
    prefill_memory, decode_memory = recipe.memory_fractions
    decode = replace(shape, memory_fraction=decode_memory)
    if recipe.decode_running:
        decode = replace(decode, batch_size=recipe.decode_running // shape.dp)
    return replace(point, token_budget=budget, batch_size=recipe.prefill_running // point.dp,
                   memory_fraction=prefill_memory, decode=decode,
                   fp8_block_gemm=recipe.fp8_block_gemm or point.fp8_block_gemm)  # fmt: skip


def _deepep_ep(tp: int, dp: int, ep: int) -> int:
    """A pool's expert parallelism under SGLang's DeepEP launch: every GPU of an
    attention-DP worker (SGLang's tp_size), whatever the row records."""
    return tp * dp if dp > 1 else ep


_DYNAMO_TRTLLM_IMAGE = "ai-dynamo/tensorrtllm-runtime:"
def _behind_dynamo(row: dict[str, str], engine: str) -> bool:
    """Whether the row's client talked to Dynamo's frontend, which routes decode requests
    round-robin (module docstring): NVIDIA's own runs and Dynamo's images
    (`_aic_silicon.dynamo_frontend`), and SGLang's srt-slurm runs."""
    return dynamo_frontend(row) or engine == "sglang"


def _engine_version(row: dict[str, str], engine: str) -> str:
    """The engine's own version ("" where the row records only Dynamo's; module docstring)."""
    if engine == "trtllm" and _DYNAMO_TRTLLM_IMAGE in (row["silicon_data_source"] or ""):
        return ""
    return row["backend_version"] or ""
