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
  every rank has one (`SchedulerConfig.adp_balance_timeout_iters`).
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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from estimators import Precision

if TYPE_CHECKING:
    from search._validate._aic_silicon import ValidationPoint

LLAMA_70B = "meta-llama/Llama-3.1-70B"
DEEPSEEK = "deepseek-ai/DeepSeek-V3"  # the built-in architecture of DeepSeek-R1 and -V3
BLACKWELL_SGLANG = ("b200", "b300")  # the GPUs of SGLang's DeepSeek-R1 B200 scripts
TRTLLM_MTP_VERSIONS = ("1.2.0rc6.post3",)


def server_options(point: ValidationPoint, tp: int, dp: int) -> dict[str, Any]:
    """The `ValidationPoint` fields of the options `point`'s server ran with beyond its
    engine's defaults (module docstring); {} for NVIDIA's own runs and unlisted scripts.
    `tp` is the attention TP degree, `dp` the attention DP one."""
    if point.source != "benchmark-db":
        return {}
    one_k = point.isl == point.osl == 1024
    if point.engine == "trtllm":
        if point.model == LLAMA_70B and one_k and tp < 8:
            return {"batch_wait_iters": 20, "batch_wait_token_ratio": 0.9}
        if point.model == DEEPSEEK and dp > 1:
            return {"adp_balance_timeout_iters": 60, "adp_balance_batching_wait_iters": 0}
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
