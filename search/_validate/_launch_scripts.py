"""What the public benchmark's launch scripts set beyond each engine's defaults.

The `benchmark-db` points of aic-silicon (module docstring of `_aic_silicon.py`) were
measured by SemiAnalysis's InferenceMAX, whose scripts (`benchmarks/*.sh` of its public
repository, one per model, GPU, precision and engine, with a `-mtp` twin for speculative
runs) start each server with options of their own.  The ones that change what the client
measures become `ValidationPoint` fields here, read from those scripts:

- TensorRT-LLM, Llama-3.1-70B at 1k/1k below TP 8 (`llama70b` script):
  ``batch_wait_timeout_iters: 20``, ``batch_wait_max_tokens_ratio: 0.9``.
- TensorRT-LLM, DeepSeek-R1 FP8 on B200 at 1k/1k from concurrency 64 (`dsr1_fp8_b200_trt`,
  its ``DELAY_BATCHING``): ``batch_wait_timeout_iters: 40``,
  ``batch_wait_max_tokens_ratio: 0.8``.  TensorRT-LLM ignores batch waiting under
  attention DP, which those points do not run.
- TensorRT-LLM, DeepSeek-R1 with attention DP (every `dsr1_*_trt` script, whenever
  ``DP_ATTENTION`` is true): ``attention_dp_config: {enable_balance: true, timeout_iters:
  60, batching_wait_iters: 0}``, the attention-DP balance that holds prompts back until
  every rank has one (`SchedulerConfig.adp_balance_timeout_iters`).  The gpt-oss scripts
  (`gptoss_fp4_b200_trt`) set ``attention_dp_config: {enable_balance: true}`` alone, which
  takes TensorRT-LLM's defaults (`AttentionDpConfig` in llmapi/llm_args.py: timeout_iters
  50, batching_wait_iters 10).
- SGLang, DeepSeek-R1 on B200 (`dsr1_fp8_b200`, `dsr1_fp4_b200`; the B300 scripts reuse
  them): ``--scheduler-recv-interval`` 30 from concurrency 16, else 10 (FP8 at TP 4: 10);
  the H200 script sets none.  SGLang's recv skipper refuses attention DP, which these
  scripts never set.

Some points were measured with speculative decoding (MTP) that the row does not record, with
an acceptance nobody recorded either, so llmcap cannot reproduce them (`speculative_run`):

- TensorRT-LLM 1.2.0rc6.post3 DeepSeek-R1 on B200: only the `-trt-mtp` configurations of the
  benchmark's master config run that image (the plain ones run 1.2.0rc6.post2), with
  ``speculative_config: {decoding_type: MTP, num_nextn_predict_layers: 3}`` (1 under
  attention DP).
- SGLang DeepSeek-R1 FP8 on B200 from concurrency 128: the plain configuration stops at
  concurrency 64; only `dsr1_fp8_b200_mtp` (EAGLE, 2 steps, 3 draft tokens) goes to 512.
- Where a plain configuration and its `-mtp` twin ran the same image at the same layout and
  concurrency (`speculative_twins`): SGLang 0.5.9 DeepSeek-R1 FP8 on B200 at TP 8,
  concurrency 4-64, and TensorRT-LLM 1.1.0rc2.post2 DeepSeek-R1 on H200 and B200, a
  measurement other than the plain configuration's is the twin's.
- A sweep that ran only `-mtp` configurations (`mtp_sweep_runs`): TensorRT-LLM
  1.1.0rc2.post2 DeepSeek-R1 measured on 2026-01-14, FP4 and FP8, B200 and H200.

The scripts also set the engine's memory plan and batching limits (`launch_limits`): the
KV-cache dtype (`kv_cache_dtype`, over the engine's default for the weights), the token
budget per iteration and the batch cap of each attention DP rank, under the engine's own
names (`token_budget`, `batch_cap`: SGLang's chunked_prefill_size / max_running_requests,
TensorRT-LLM's max_num_tokens / max_batch_size, vLLM's max_num_batched_tokens /
max_num_seqs), and its memory fraction (`memory_fraction`: SGLang's mem_fraction_static and
vLLM's gpu_memory_utilization, of the GPU's memory; TensorRT-LLM's free_gpu_memory_fraction,
of the memory left free; each what the engine profile's memory plan takes).  A batch cap
below the concurrency makes requests queue, as they did.  Read from the scripts
(`benchmarks/single_node/<name>.sh` and the older `benchmarks/<name>.sh`, which agree on
these values):

- TensorRT-LLM DeepSeek-R1 on B200 and H200 (`dsr1_fp8_b200_trt`, `dsr1_fp4_b200_trt`,
  `dsr1_fp8_h200_trt`): ``kv_cache_config.dtype: fp8``; ``max_num_tokens`` the
  concurrency plus the prompt length plus 64 rounded up to 64, at least 8192;
  ``free_gpu_memory_fraction`` 0.8 on B200 (FP8 at 1k/8k from concurrency 256: 0.7, at
  8k/1k on 4 GPUs: 0.75), 0.75 on H200.  Their decode CUDA graphs
  (``cuda_graph_config.max_batch_size``) reach 512 (FP4 B200) or the concurrency (FP8 B200;
  a rank's share of it under attention DP from 256), the batch every TensorRT-LLM
  deployment is simulated with (engines.yaml `decode_graphs_cover_batch`), but 128 on H200,
  whose points at a higher concurrency therefore take graphs the script did not capture.
  The FP8 B200 script read (InferenceX @0a919c5) also captures context iterations as
  piecewise graphs at some lengths and concurrencies (``enable_piecewise_cuda_graph``);
  which of its versions measured which rows was not established, so that is not applied.
  None of the TensorRT-LLM scripts (these, gpt-oss's below, Llama-3.1-70B's) turns chunked
  context on, so contexts run whole, as many as fit max_num_tokens beside the decodes
  (`scheduler` "orca"), where the script's limit is recorded: DeepSeek-R1's and
  gpt-oss's (Llama-3.1-70B's ``--max_num_tokens $MAX_MODEL_LEN`` is not read per run, and
  its points keep the profile's chunks of 8192).
- TensorRT-LLM gpt-oss (`gptoss_fp4_b200_trt`, `gptoss_fp4_h200_trt`): ``max_num_tokens``
  20000, ``free_gpu_memory_fraction`` 0.85, decode CUDA graphs up to the concurrency; on
  B200 ``kv_cache_config.dtype: fp8`` and ``--max_batch_size 512`` (H200: dtype auto, the
  batch cap the concurrency).
- SGLang DeepSeek-R1 FP8 on B200 (`dsr1_fp8_b200`; B300 reuses it): ``--kv-cache-dtype
  fp8_e4m3``; at TP 8 ``--chunked-prefill-size 32768 --max-running-requests 128
  --mem-fraction-static 0.82``, at TP 4 8192, 32 and 0.95.  FP4 (`dsr1_fp4_b200`):
  fp8_e4m3, 16384, 256 and 0.85.  Both run ``--moe-runner-backend flashinfer_trtllm``
  (`moe_kernel`), under which SGLang turns its shared-experts fusion off (engines.yaml
  `shared_experts_fusion`).  The FP8 script also exports ``SGL_ENABLE_JIT_DEEPGEMM=false``
  (``SGLANG_ENABLE_JIT_DEEPGEMM`` in its single_node version) and
  ``SGLANG_ENABLE_FLASHINFER_GEMM=true`` (both versions read, 2026-11-30), so the
  checkpoint's dense block-FP8 GEMMs run FlashInfer's groupwise kernel, not DeepGEMM
  (`fp8_block_gemm`, engines.yaml).  H200 (`dsr1_fp8_h200`): chunked prefill 32768, 512 running
  requests at 1k/1k else 256, 0.82; its KV cache stays 16-bit, and it keeps SGLang's
  default MoE runner, so the fusion.
- vLLM gpt-oss on B200 (`gptoss_fp4_b200` and its older `_docker` and `_slurm` twins):
  ``kv-cache-dtype: fp8``, ``--max-num-seqs 512`` (its 8192 batched tokens and 0.9 are
  vLLM's own), and ``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1`` (each of the three as stored,
  and a fork's copy of the first, read 2026-11-29; their other versions were not read):
  vLLM's MXFP4 backend selection (quantization/mxfp4.py get_mxfp4_backend) then runs
  SM100_FI_MXFP4_MXFP8_TRTLLM, FlashInfer's TensorRT-LLM MoE kernel with the activations
  quantized to MXFP8, instead of its default with 16-bit ones (`moe_kernel`
  VLLM_FLASHINFER_MXFP8_MOE).  vLLM's 0.24.0 B200 table times that path
  (`..._flashinfer_trtllm_mxfp4_mxfp8_...`, W4A8) at two other models' experts only, so
  it is scaled to gpt-oss's (`scaled_to_shape`): 1.0 ms a layer at 8,192 tokens at TP 1,
  against 3.0 ms for the 16-bit-activation kernel timed at gpt-oss's own shape (SGLang's
  collector timed the W4A8 kernel there at 0.8 ms).  The H100/H200 scripts keep vLLM's KV
  dtype.  Every version of the gpt-oss scripts, on all three GPUs, sets
  ``max-cudagraph-capture-size: 2048``: iterations of up to 2048 tokens, prefills among
  them, run as CUDA graphs (`graph_max_tokens`, over the engine's min(2 x max_num_seqs,
  512)).  The H100 and H200 scripts also export
  ``VLLM_MXFP4_USE_MARLIN=1`` from the v0.13.0 image on (InferenceX PR #327, with the
  image), so vLLM runs the experts with its Marlin MXFP4 kernel instead of its Hopper
  default, the Triton kernel (`moe_kernel`; 2.2x slower at 8,192 tokens at TP 2); the
  0.11 runs before it keep the default.
- vLLM MiniMax-M2.5 FP8 on H200 (`minimaxm2.5_fp8_h200`), every version before PR #1354
  (2026-05-12; the 0.16 and 0.18 rows were measured in March): ``--gpu-memory-utilization
  0.95``, and ``--enable-expert-parallel`` whenever ``EP_SIZE -ge 1``, i.e. always: the
  experts run expert-parallel over the TP GPUs (`ep`) though the rows record EP 1.  The
  KV dtype, batch cap and token budget the script sets came with PR #1354, after these
  runs.  FP8 on B200/B300 (`minimaxm2.5_fp8_b200`) before PR #947 (the 0.19 image,
  2026-04-03): 0.95 and ``--enable-expert-parallel`` on every run (first hard-coded, then
  ``-ge 1``), so the 0.17 rows ran EP = TP.  Every stored version from that PR on (its
  ``-gt 1``: EP only where the configuration sets it; whn09/InferenceX @43ae41b7,
  xinli-sw/InferenceX @09fc7745, mpashkovskii/InferenceX @01d209c2, read 2026-11-29), and
  `minimaxm2.5_fp8_b300`, which PR #1054 added "reus[ing] the existing MiniMax-M2.5 FP8 B200
  vLLM recipe as-is", runs vLLM's own 0.90 with ``--kv-cache-dtype fp8``,
  ``--max-cudagraph-capture-size 2048``, ``--max-num-batched-tokens`` twice the prompt length
  and ``--stream-interval 20``, the recipe of the FP4 scripts below.
- vLLM MiniMax-M2.5 NVFP4 on B200 and B300 with the 0.19 image (`minimaxm2.5_fp4_b200`,
  and `minimaxm2.5_fp4_b300`, which InferenceX PR #1055 added "reus[ing] the existing
  MiniMax-M2.5 FP4 B200 vLLM recipe as-is"; every stored version of both since, read
  2026-11-29): ``--kv-cache-dtype fp8``, ``--max-cudagraph-capture-size 2048``,
  ``--max-num-batched-tokens`` twice the prompt length (per attention DP rank: each DP
  engine takes the same arguments), and, when the configuration sets ``dp-attn``,
  ``--tensor-parallel-size=1 --data-parallel-size=$TP --enable-expert-parallel``: attention
  DP over the TP GPUs with the experts expert-parallel over them.  The rows do not say
  which configuration set ``dp-attn`` (the dumps record a vLLM EP layout with attention DP
  T either way, `_aic_silicon.dump_layout`); their `config_id` does
  (`ATTENTION_DP_CONFIGS`).  The ``--stream-interval 20`` they also set streams the first
  token at once (vLLM sends a request's first output unbatched), so TTFT keeps its meaning.
  The recipe and the ``dp-attn`` entries came with InferenceX PR #996 ("Add ep2, ep4, and
  dp-attn configurations for higher concurrency sweeps"), whose recipe vllm-project/recipes
  PR #320 (2026-04-08, "Based on SemiAnalysisAI/InferenceX#996") gives as FP8 KV cache,
  ``--max-cudagraph-capture-size 2048`` and ``--stream-interval 20``.  The key's image
  moved from 0.17 to 0.19 with no changelog entry of its own (PR #1448 later moved it "from
  v0.19.0-cu130"), and its 0.19 rows were measured from 2026-04-08 on, the B300 key's (PR
  #1055, reusing the B200 recipe) from 04-17.  The 0.17 rows and the nightly-image rows of
  the March dump predate it (the B200 script then set ``--max-num-seqs $CONC`` and vLLM's
  defaults).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from estimators import FP8_BLOCK_GEMM_FLASHINFER, Precision, version_tuple

if TYPE_CHECKING:
    from search._validate._aic_silicon import ValidationPoint

LLAMA_70B = "meta-llama/Llama-3.1-70B"
DEEPSEEK = "deepseek-ai/DeepSeek-V3"  # the built-in architecture of DeepSeek-R1 and -V3
GPT_OSS = "openai/gpt-oss-120b"
MINIMAX = "MiniMaxAI/MiniMax-M2.5"
BLACKWELL_SGLANG = ("b200", "b300")  # the GPUs of SGLang's DeepSeek-R1 B200 scripts
# the MoE runner SGLang's DeepSeek-R1 scripts and recipes force on Blackwell
# (--moe-runner-backend), as a substring of the MoE tables' kernel_source
SGLANG_BLACKWELL_DEEPSEEK_MOE = "flashinfer_trtllm"
# the MoE kernel vLLM runs MXFP4 experts with on Blackwell under
# VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 (FlashInfer's TensorRT-LLM MoE kernel, MXFP8
# activations), as a substring of the MoE tables' kernel_source
VLLM_FLASHINFER_MXFP8_MOE = "flashinfer_trtllm_mxfp4_mxfp8"
TRTLLM_MTP_VERSIONS = ("1.2.0rc6.post3",)


def server_options(point: ValidationPoint, tp: int, dp: int) -> dict[str, Any]:
    """The `ValidationPoint` fields of the options `point`'s server ran with beyond its
    engine's defaults (module docstring); {} for NVIDIA's own runs and unlisted scripts.
    `tp` is the attention TP degree, `dp` the attention DP one."""
    if point.source != "benchmark-db":
        return {}
    return {**_scheduling_options(point, tp, dp), **launch_limits(point, tp, dp)}


def _scheduling_options(point: ValidationPoint, tp: int, dp: int) -> dict[str, Any]:
    """Batch waiting and request polling (module docstring)."""
    one_k = point.isl == point.osl == 1024
    if point.engine == "trtllm":
        if point.model == LLAMA_70B and one_k and tp < 8:
            return {"batch_wait_iters": 20, "batch_wait_token_ratio": 0.9}
        if point.model == DEEPSEEK and dp > 1:
            return {"adp_balance_timeout_iters": 60, "adp_balance_batching_wait_iters": 0}
        if point.model == GPT_OSS and dp > 1:
            return {"adp_balance_timeout_iters": 50, "adp_balance_batching_wait_iters": 10}
        delay_batching = (
            point.model == DEEPSEEK and point.sku == "b200" and point.precision is Precision.FP8
            and one_k and dp == 1 and point.concurrency >= 64
        )  # fmt: skip
        if delay_batching:
            return {"batch_wait_iters": 40, "batch_wait_token_ratio": 0.8}
        return {}
    if point.engine == "sglang" and dp == 1 and point.sku in BLACKWELL_SGLANG:
        fp8_tp4 = point.precision is Precision.FP8 and tp < 8
        return {"recv_interval": 30 if point.concurrency >= 16 and not fp8_tp4 else 10}
    return {}


def speculative_run(point: ValidationPoint) -> str | None:
    """Why `point` is a speculative-decoding run that its row does not record (module
    docstring), or None."""
    if point.source != "benchmark-db" or point.model != DEEPSEEK:
        return None
    if point.engine == "trtllm" and point.engine_version in TRTLLM_MTP_VERSIONS:
        return "speculative (MTP) run, acceptance not recorded (TensorRT-LLM -mtp image)"
    fp8 = point.precision is Precision.FP8
    if point.engine == "sglang" and point.sku == "b200" and fp8 and point.concurrency >= 128:
        return "speculative (MTP) run, acceptance not recorded (SGLang -mtp concurrency)"
    return None


# (engine, version, GPU, weights) where DeepSeek-R1's plain configuration and its -mtp twin
# ran one image (`speculative_twins`)
SHARED_MTP_IMAGES = frozenset({
    ("sglang", "0.5.9", "b200", Precision.FP8),  # dsr1-fp8-b200-sglang and -sglang-mtp
    ("trtllm", "1.1.0rc2.post2", "h200", Precision.FP8),  # dsr1-fp8-h200-trt and -trt-mtp
    ("trtllm", "1.1.0rc2.post2", "b200", Precision.FP8),  # dsr1-fp8-b200-trt and -trt-mtp
})  # fmt: skip
# two records of one measurement differ at most in the last printed digit
SAME_MEASUREMENT_REL_TOL = 1e-9
TWIN_REASON = "speculative (MTP) run, acceptance not recorded (-mtp twin of a plain measurement)"


def speculative_twins(points: Iterable[tuple[ValidationPoint, str]]) -> dict[str, str]:
    """The ids of the points measured by a plain configuration's `-mtp` twin where both ran
    one image (`SHARED_MTP_IMAGES`), each with the reason; `points` pairs each point with
    its row's `silicon_data_source`.

    Evidence (SemiAnalysisAI/InferenceX-app, packages/db/migrations/001_initial_schema.sql):
    the benchmark's database keys a configuration by GPU, engine, model, precision,
    `spec_method` and parallel layout, so a plain configuration and its `-mtp` twin at one
    layout are two configurations; it keeps one result per (configuration, run, ISL, OSL,
    concurrency), and its `latest_benchmarks` view the newest per (configuration, ISL, OSL,
    concurrency).  The `db-dump/...` rows are that view: 882 rows with config_id, no two on
    one (config_id, ISL, OSL, concurrency) though 24 configurations have rows from two or
    more runs, and none from an image only the `-mtp` configurations ran (TensorRT-LLM
    1.2.0rc6.post3, SGLang 0.5.9 DeepSeek FP8 above concurrency 64).  Their configurations
    here are the plain ones:

    - SGLang 0.5.9, B200 FP8 TP 8: config_id 87 (run 337, 2026-03-25).  Configuration ids
      are serial and grow with the runs that first recorded them (75-99: 2025 runs 101-124;
      177-193: runs 221-253; 271: the TP 4 entries InferenceX PR 411 added; 455-655: 2026
      runs), so 87 was recorded long before `dsr1-fp8-b200-sglang-mtp` existed (InferenceX
      perf-changelog.yaml, PR 626).  Both configurations ran image v0.5.9-cu130 at TP 8, EP
      1 from concurrency 4 (the plain one to 64, the `-mtp` one to 512: `{ tp: 8, ep: 1,
      conc-start: 4, conc-end: 512, spec-decoding: mtp }`), both on 2026-03-25 (the
      `-mtp` rows from concurrency 128 carry that date).  At each of the eleven points
      where the dump holds config 87's measurement (1k/1k and 1k/8k 4-64, 8k/1k 4) the file
      holds exactly two, config 87's and one other, while none of the four points only the
      plain configuration ran (TP 4, 8k/1k 4-32) holds a second: the other is the `-mtp`
      run's.  The date alone would not tell a twin from a rerun (MiniMax-M2.5's vLLM 0.19
      B200 rows hold same-day reruns of one configuration within 2%).
    - TensorRT-LLM 1.1.0rc2.post2: config_id 177 (B200 FP8 TP 8 EP 8), 181 (H200 TP 8 EP
      8) and 183 (H200 DEP 8), runs 221-223, 2025-12-15.  They cover exactly the search
      spaces of the plain `dsr1-fp8-b200-trt` and `dsr1-fp8-h200-trt` in
      `.github/configs/nvidia-master.yaml` before PR 392 added the `-trt-mtp` twins on the
      same image (as a fork kept it: ishandhanani/InferenceMAX @0e3c3598): B200 1k/1k
      concurrency 4-32 (DEP 8 at 64), 1k/8k and 8k/1k 4-64; H200 1k/1k and 1k/8k 4-64,
      8k/1k 4-32 and DEP 8 at 64.  The other measurements at those points are dated
      2026-01-14 and 2026-01-28, later than the ones the view keeps as the plain
      configurations' newest.

    So in these groups, where the dump holds the plain configuration's measurement of a
    deployment (image, layout, lengths, concurrency), another measurement of it dated no
    earlier, with a different TTFT or TPOT, is its twin's.  The measured values serve only
    to tell one record from another (equal within `SAME_MEASUREMENT_REL_TOL`: the dumps
    print a copy's last digit differently), as for repeated rows; which of two is faster
    plays no part.  Points the dump does not cover stay: nothing in their rows says which
    configuration measured them."""
    candidates: list[tuple[ValidationPoint, tuple[Any, ...], tuple[float, float], str]] = []
    plain: dict[tuple[Any, ...], tuple[tuple[float, float], str]] = {}
    for point, record in points:
        if not _public_deepseek_agg(point):
            continue
        image = (point.engine, point.engine_version, point.sku, point.precision)
        if image not in SHARED_MTP_IMAGES:
            continue
        deployment = (
            point.engine, point.engine_version, point.sku, point.precision, point.tp,
            point.dp, point.ep, point.isl, point.osl, point.concurrency,
        )  # fmt: skip
        measured = (point.measured_ttft_ms, point.measured_tpot_ms)
        date = measured_date(record)
        if record.startswith("db-dump"):
            plain[deployment] = (measured, date)
        else:
            candidates.append((point, deployment, measured, date))
    twins: dict[str, str] = {}
    for point, deployment, measured, date in candidates:
        if deployment not in plain:
            continue
        plain_measured, plain_date = plain[deployment]
        same = all(
            math.isclose(a, b, rel_tol=SAME_MEASUREMENT_REL_TOL)
            for a, b in zip(measured, plain_measured, strict=True)
        )
        if not same and date >= plain_date:
            twins[point.id] = TWIN_REASON
    return twins


# (engine, version) of DeepSeek-R1 rows -> the measurement dates of sweeps that ran only its
# `-mtp` configurations on that image (`mtp_sweep_runs`)
MTP_ONLY_SWEEPS: dict[tuple[str, str], frozenset[str]] = {
    ("trtllm", "1.1.0rc2.post2"): frozenset({"2026-01-14"}),  # InferenceX PR 392's sweep
}
MTP_SWEEP_REASON = "speculative (MTP) run, acceptance not recorded (sweep of -mtp configurations)"


def mtp_sweep_runs(points: Iterable[tuple[ValidationPoint, str]]) -> dict[str, str]:
    """The ids of the aggregated DeepSeek-R1 points measured on a date when the benchmark
    swept only the `-mtp` configurations of their image (`MTP_ONLY_SWEEPS`), each with the
    reason; `points` pairs each point with its row's `silicon_data_source`.

    Evidence (SemiAnalysisAI/InferenceX, perf-changelog.yaml, read 2026-11-25): since PR 267
    (merged 2025-12-15: "sweeps will no longer run nightly, rather they will run only when
    necessary as indicated by the perf-changelog.yaml file", its author on PR 256 that day)
    a sweep runs the configuration keys a new changelog entry names.  Between
    that and PR 587's evals-only entry (late January 2026), the only entry naming a
    TensorRT-LLM DeepSeek-R1 single-node key is PR 392's, which names `dsr1-fp4-b200-trt-mtp`,
    `dsr1-fp8-b200-trt-mtp` and `dsr1-fp8-h200-trt-mtp` alone ("Add MTP (Multi-Token
    Prediction) support for single-node TRT configs"); their plain twins ran the same image,
    1.1.0rc2.post2, until PRs 594 and 620 moved them to 1.2.0rc6.post2.  So the rows of that
    image measured on 2026-01-14 are the `-mtp` configurations'.  PR 587's sweep named both
    twins, so a row of its date (2026-01-28) stays unless `speculative_twins` tells it
    apart.  The measured values play no part."""
    runs: dict[str, str] = {}
    for point, record in points:
        if not _public_deepseek_agg(point):
            continue
        dates = MTP_ONLY_SWEEPS.get((point.engine, point.engine_version), frozenset())
        if measured_date(record) in dates:
            runs[point.id] = MTP_SWEEP_REASON
    return runs


def _public_deepseek_agg(point: ValidationPoint) -> bool:
    """Whether `point` is an aggregated DeepSeek-R1 measurement of the public benchmark, the
    rows `speculative_twins` and `mtp_sweep_runs` judge."""
    return point.source == "benchmark-db" and point.model == DEEPSEEK and point.mode == "agg"


def measured_date(record: str) -> str:
    """The ``measured=`` date (YYYY-MM-DD) of a row's `silicon_data_source`, or ""."""
    return record_field(record, "measured")[:10]


def record_field(record: str, field: str) -> str:
    """The value of ``field=`` in a row's `silicon_data_source`, or ""."""
    for part in record.split(";"):
        name, _, value = part.strip().partition("=")
        if name == field:
            return value
    return ""


# (engine, model, GPU, weights) -> the benchmark database's configuration ids of the
# `dp-attn: true` search-space entries of a launch script that runs attention DP for them
# (`attention_dp_launch`)
ATTENTION_DP_CONFIGS: dict[tuple[str, str, str, Precision], frozenset[int]] = {
    ("vllm", MINIMAX, "b200", Precision.FP4): frozenset({707}),
    ("vllm", MINIMAX, "b300", Precision.FP4): frozenset({727}),
}


def attention_dp_launch(point: ValidationPoint, record: str) -> bool:
    """Whether `point`'s configuration ran attention DP over its TP GPUs (TP 1 a rank, EP
    over them all) where its row records the benchmark's TP with EP; `record` is the row's
    `silicon_data_source`.

    Evidence (module docstring for the scripts): InferenceX's `nvidia-master.yaml` for the
    0.19 image (mpashkovskii/InferenceX @01d209c2, read 2026-11-29; the `dp-attn` variants
    came with PR #996, "Add ep2, ep4, and dp-attn configurations for higher concurrency
    sweeps") lists one `dp-attn` entry per key: `minimaxm2.5-fp4-b200-vllm` ``{ tp: 2, ep: 2,
    dp-attn: true, conc-start: 256, conc-end: 1024 }`` beside a plain ``{ tp: 2, ep: 2 }`` at
    concurrency 128 (8k/1k: 128-512), and `minimaxm2.5-fp4-b300-vllm` ``{ tp: 2, ep: 2,
    dp-attn: true }`` at 256-2048 (8k/1k: 512) beside a plain one at 128.  Of the two TP 2 /
    EP 2 configurations of each GPU in the dump, 707 (1k/1k 256-1024) and 727 (1k/1k
    256-2048, 8k/1k 512) ran the `dp-attn` entries' concurrencies; 706 and 726 ran the plain
    entries' and others of earlier search spaces (PR #1107 changed B300's ranges), 1k/1k
    and 8k/1k 128-512, none above 512.  Config 727's concurrency-2048 row measures a TPOT of
    66 ms against 44 ms at 1024, more than the 1024 sequences one TP engine takes by default
    (vLLM's max_num_seqs at 70 GiB and more) could hold, as two DP engines of 1024 each can.
    The FP8 B300 key's `dp-attn` entry (config 827) ran a script without the attention-DP
    branch (`minimaxm2.5_fp8_b300`: TP with EP whatever the entry says); its
    concurrency-1024 row measures within 0.4% of config 735's, the plain TP 2 / EP 2
    entry's, as two runs of one layout do.  The measured values play no
    part in the rule; the configuration id decides."""
    key = (point.engine, point.model, point.sku, point.precision)
    config = record_field(record, "config_id")
    return config.isdigit() and int(config) in ATTENTION_DP_CONFIGS.get(key, frozenset())


@dataclass(frozen=True, slots=True)
class ScriptLimits:
    """What one launch script sets of the engine's memory plan, batching limits, kernels and
    parallelism (module docstring); a zero, empty or None field is the engine's own."""

    kv_cache_dtype: Precision | None = None
    token_budget: int = 0  # per attention DP rank, under the engine's own name
    batch_cap: int = 0  # per attention DP rank
    memory_fraction: float = 0.0
    graph_max_tokens: int = 0  # vLLM's max-cudagraph-capture-size
    moe_kernel: str = ""  # the MoE kernel an option or environment variable forces
    fp8_block_gemm: str = ""  # ... and the block-FP8 dense GEMM kernel (engines.yaml)
    ep: int = 0  # the expert parallelism it turns on (--enable-expert-parallel: EP = its GPUs)
    scheduler: str = ""  # the batching policy its options amount to (`ValidationPoint.scheduler`)

    def fields(self) -> dict[str, Any]:
        """As `ValidationPoint` fields; the script's KV-cache dtype is the point's KV
        precision too, over the engine's guessed default (`kv_precision_for`)."""
        found: dict[str, Any] = {}
        if self.kv_cache_dtype is not None:
            found["kv_cache_dtype"] = found["kv_precision"] = self.kv_cache_dtype
        for name in _SAME_NAMED_FIELDS:
            value = getattr(self, name)
            if value:
                found[name] = value
        return found


# the `ScriptLimits` fields that are `ValidationPoint` fields of the same name
_SAME_NAMED_FIELDS = (
    "token_budget", "batch_cap", "memory_fraction", "graph_max_tokens", "moe_kernel",
    "fp8_block_gemm", "ep", "scheduler",
)  # fmt: skip


def launch_limits(point: ValidationPoint, tp: int, dp: int) -> dict[str, Any]:
    """The `ValidationPoint` fields of the KV-cache dtype, token budget, batch cap, memory
    fraction, CUDA-graph capture size, MoE kernel and expert parallelism `point`'s launch
    script set (module docstring); {} where it set none.
    `tp` x `dp` is the script's TP (the GPUs of one server)."""
    rule = _LIMIT_RULES.get((point.engine, point.model))
    limits = rule(point, tp * dp) if rule is not None else None
    return limits.fields() if limits is not None else {}


def trtllm_deepseek_max_num_tokens(concurrency: int, isl: int) -> int:
    """``MAX_NUM_TOKENS`` of the DeepSeek-R1 TensorRT-LLM scripts: ``(CONC + ISL + 64 + 63)
    / 64 * 64``, at least 8192."""
    return max(8192, (concurrency + isl + 64 + 63) // 64 * 64)


def _trtllm_deepseek(point: ValidationPoint, gpus: int) -> ScriptLimits | None:
    if point.sku == "h200":  # dsr1_fp8_h200_trt
        fraction = 0.75
    elif point.sku != "b200":
        return None
    elif point.precision is not Precision.FP8:  # dsr1_fp4_b200_trt
        fraction = 0.8
    elif (point.isl, point.osl) == (1024, 8192) and point.concurrency >= 256:
        fraction = 0.7  # dsr1_fp8_b200_trt
    elif (point.isl, point.osl) == (8192, 1024) and gpus == 4:
        fraction = 0.75
    else:
        fraction = 0.8
    tokens = trtllm_deepseek_max_num_tokens(point.concurrency, point.isl)
    return ScriptLimits(Precision.FP8, tokens, memory_fraction=fraction, scheduler="orca")


def _trtllm_gpt_oss(point: ValidationPoint, gpus: int) -> ScriptLimits | None:
    if point.sku == "b200":  # gptoss_fp4_b200_trt
        return ScriptLimits(Precision.FP8, 20000, 512, 0.85, scheduler="orca")
    if point.sku == "h200":  # gptoss_fp4_h200_trt: kv dtype auto
        return ScriptLimits(None, 20000, point.concurrency, 0.85, scheduler="orca")
    return None


def _sglang_deepseek(point: ValidationPoint, gpus: int) -> ScriptLimits | None:
    if point.sku in BLACKWELL_SGLANG:
        kernel = SGLANG_BLACKWELL_DEEPSEEK_MOE
        if point.precision is not Precision.FP8:  # dsr1_fp4_b200
            return ScriptLimits(Precision.FP8, 16384, 256, 0.85, moe_kernel=kernel)
        kernels = {"moe_kernel": kernel, "fp8_block_gemm": FP8_BLOCK_GEMM_FLASHINFER}
        if gpus < 8:  # dsr1_fp8_b200 at TP 4 (DeepGEMM off, as at TP 8)
            return ScriptLimits(Precision.FP8, 8192, 32, 0.95, **kernels)
        return ScriptLimits(Precision.FP8, 32768, 128, 0.82, **kernels)
    if point.sku == "h200":  # dsr1_fp8_h200
        running = 512 if point.isl == point.osl == 1024 else 256
        return ScriptLimits(None, 32768, running, 0.82)
    return None


def _release(point: ValidationPoint) -> tuple[int, ...]:
    """The release of `point`'s engine image, () for a nightly or dev build."""
    return version_tuple(point.engine_version) or ()


def _vllm_gpt_oss(point: ValidationPoint, gpus: int) -> ScriptLimits:
    if point.sku == "b200":  # gptoss_fp4_b200: VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1
        mxfp8 = VLLM_FLASHINFER_MXFP8_MOE
        return ScriptLimits(Precision.FP8, batch_cap=512, graph_max_tokens=2048, moe_kernel=mxfp8)
    # gptoss_fp4_h100, gptoss_fp4_h200: VLLM_MXFP4_USE_MARLIN=1 from the v0.13.0 image on
    marlin = "marlin" if _release(point) >= (0, 13) else ""
    return ScriptLimits(graph_max_tokens=2048, moe_kernel=marlin)


def _vllm_minimax(point: ValidationPoint, gpus: int) -> ScriptLimits | None:
    fp8 = point.precision is Precision.FP8
    if fp8 and point.sku == "h200":  # minimaxm2.5_fp8_h200, every version before PR #1354
        return ScriptLimits(memory_fraction=0.95, ep=gpus)
    if point.sku not in ("b200", "b300") or point.precision not in (Precision.FP8, Precision.FP4):
        return None
    if _release(point) >= (0, 19):  # the FP8 scripts from PR #947, the FP4 ones from PR #996
        return ScriptLimits(Precision.FP8, token_budget=2 * point.isl, graph_max_tokens=2048)
    if fp8:  # before PR #947: 0.95, the experts always expert-parallel
        return ScriptLimits(memory_fraction=0.95, ep=gpus)
    return None


_LIMIT_RULES: dict[tuple[str, str], Callable[[ValidationPoint, int], ScriptLimits | None]] = {
    ("trtllm", DEEPSEEK): _trtllm_deepseek,
    ("trtllm", GPT_OSS): _trtllm_gpt_oss,
    ("sglang", DEEPSEEK): _sglang_deepseek,
    ("vllm", GPT_OSS): _vllm_gpt_oss,
    ("vllm", MINIMAX): _vllm_minimax,
}
