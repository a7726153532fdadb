"""The `aic-silicon` dataset: measured serving points shipped in NVIDIA's aiconfigurator-core.

`aiconfigurator_core/systems/silicon_sample.csv` holds end-to-end measurements of real
deployments: one row per (model, GPU, engine and version, precision, TP/PP, ISL/OSL,
concurrency) with the client's mean TTFT and mean TPOT in milliseconds.  The file is read
from the installed package at run time (`pip install llmcap[aic]`), never copied here.

How the points were measured (from the rows' `silicon_data_source` and aiconfigurator's own
accuracy tooling): a benchmark client drives one aggregated server in a closed loop at the
listed concurrency C (`silicon_concurrency=C`; C requests start together and each finished
request is replaced at once), ignoring EOS, about 10 C requests per point.  `silicon_ttft_ms`
is the mean over requests of first-token time minus send time; `silicon_tpot_ms` is the mean
over requests of (end-to-end - TTFT) / (output tokens - 1), so it excludes the first token.

Warm-up: the public benchmark's single-node client (InferenceMAX's clone of
kimbochen/bench_serving, `benchmark_serving.py`) sent one test request, then timed every
request from a fresh server; warm-up requests (2 C, not timed) came with InferenceMAX PR #480
("upstream kimbochen/bench_serving, adding warmup", opened 2026-01-17; its warm-up code was
upstream by 2026-02-03, when ishandhanani/srt-slurm PR #138 copied it).  Before that, the first
wave of a point's requests met the server cold (kernels compiled, loaded or autotuned on first
use), and the mean TTFT carries whatever stall that caused: X seconds on the first C of the
10 C requests adds X / 10 to the mean at every concurrency.  How large X was depends on the
engine and its kernels (the eight Llama-3.1-70B TensorRT-LLM and vLLM points of `validate
--filter source=benchmark-db --limit 8`, all measured then, are predicted at 10% TTFT MAPE
without one; SGLang's DeepSeek-R1 FP4 rows of November 2025 measure 5-9 s at every
concurrency, 0.15-0.8 s from March 2026 on); the simulator has no cold start, and none is
guessed.  Each aggregated `benchmark-db` point says which client measured it
(`client_warmup`, by the row's `measured=` date): before the PR opened, no warm-up; after
2026-02-03, warm-up; in between (109 rows) either.  The report groups the errors by it.
The disaggregated rows' multi-node client (srt-slurm's sa-bench) warmed each concurrency up
with 5 C requests before timing it, but which client measured each of those rows is not
recorded.

The two campaigns in the file differ in their prompt and output lengths (`source`):
- `benchmark-db`, the public benchmark dump (`db-dump/...`, `source_file=2026-04-06.csv` and
  its earlier copy `source_file=2026-03-25.csv`, whose records carry the same fields
  (measured date, image, wip) and 756 of whose 1,353 rows repeat a later dump's measurement
  to the last digit: Llama-3.1-70B, DeepSeek-R1, gpt-oss and others at 1k/1k, 1k/8k and
  8k/1k on H100/H200/B200; a measurement counts once, its copies are skipped as repeats),
  ran InferenceMAX's client
  (`benchmark_serving.py --dataset-name random --random-range-ratio 0.8 --num-prompts 10C
  --max-concurrency C --request-rate inf --ignore-eos`): each request's prompt and output
  length is drawn uniformly from [int(0.8 L), L] for the listed L.  The spread matters: it
  staggers the clients, so prefills rarely queue behind each other as they would if every
  request had the same length and the first wave's clients stayed in step.  Its launch
  scripts also set server options: vLLM's max-num-batched-tokens 8192 and max-num-seqs C
  (the engine's own limits with the batch capped at C, as every point is run), and the
  batch waiting, request polling, KV-cache dtype, token budgets, batch caps and memory
  fractions of `_launch_scripts.py`, which also names the runs made with speculative
  decoding that the rows do not record (skipped).
- `aic-collection`, NVIDIA's own runs: the listed lengths, fixed, against deployments
  `aiconfigurator eval` configured with aiconfigurator's config generator, whose engine
  options beyond the defaults are `_aic_generator.py`'s (TensorRT-LLM's token limit just
  above one prompt, contexts whole).  Two of its files
  (`source_file=kimi-k2.5-gap-analysis.csv`, `qwen3.5-397b-gap-analysis.csv`) are not runs
  of NVIDIA's own: each of their 123 rows is a benchmark dump's row, its means rounded to
  0.01 ms, so they are skipped as copies (`_dump_copy_key`).

Only the points llmcap can represent are kept: aggregated mode, a model the catalog knows
(dense, or a mixture of experts whose MoE TP x EP spans its attention DP x TP GPUs), a GPU the
catalog knows, attention TP inside one node that divides the heads, 16-bit, FP8 or FP4
weights (each row mapped to the layout of the checkpoint it measured:
`checkpoint_precisions`), a recorded concurrency that the row's one worker ran
(`unrecorded_workers`).
Every other row is counted under the reason it was skipped.  Disaggregated rows
(`mode=disagg`: a prefill pool and a decode pool) are mapped by `_aic_disagg.py` when asked
for (`select_points(modes=...)`), under the same rules per pool.
"""

from __future__ import annotations

import csv
import datetime
import functools
import io
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

from estimators import ModelArchitecture, Precision, load_model
from search._validate._aic_generator import generated_options
from search._validate._launch_scripts import (
    attention_dp_launch,
    measured_date,
    mtp_sweep_runs,
    record_field,
    server_options,
    speculative_run,
    speculative_twins,
)
from sku_catalog import load_catalog

PACKAGE = "aiconfigurator_core"
RESOURCE = ("systems", "silicon_sample.csv")
INSTALL_HINT = "pip install 'llmcap[aic]'  (aiconfigurator-core==0.12.0)"

# aiconfigurator system name -> llmcap catalog SKU id
SYSTEM_TO_SKU: dict[str, str] = {
    "h100_sxm": "h100-sxm",
    "h200_sxm": "h200",
    "b200_sxm": "b200",
    "b300_sxm": "b300",
    "gb200": "gb200",  # the catalog's gb200 node is the NVL72 rack (its NVLink domain)
    "a100_sxm": "a100-80gb",
    "l40s": "l40s",
}

# gemm_quant_mode -> weight precision; an empty cell is the checkpoint's 16-bit weights;
# nvfp4: NVIDIA's NVFP4 checkpoint of the model (its layout: estimators/_weight_precision.py)
GEMM_TO_PRECISION: dict[str, Precision] = {
    "": Precision.BF16,
    "bf16": Precision.BF16,
    "fp16": Precision.FP16,
    "fp8": Precision.FP8,
    "fp8_block": Precision.FP8,
    "nvfp4": Precision.FP4,
}
# the gemm_quant_mode of a model's own INT4 weight-only checkpoint: Kimi-K2.5's (16-bit
# GEMMs, INT4 routed experts: its `expert_precision`); other models' INT4 weights are not
# priced (`checkpoint_precisions`)
OWN_INT4 = "int4_wo"
# moe_quant_mode -> routed-expert precision (an empty cell: the checkpoint's own)
MOE_TO_PRECISION: dict[str, Precision | None] = {
    "": None,
    "bf16": Precision.BF16,
    "bfloat16": Precision.BF16,
    "fp16": Precision.FP16,
    "fp8": Precision.FP8,
    "fp8_block": Precision.FP8,
    "nvfp4": Precision.FP4,
    "w4a16_mxfp4": Precision.MXFP4,
    "w4a8_mxfp4_mxfp8": Precision.MXFP4,
    "int4_wo": Precision.INT4,
}

ENGINES = ("vllm", "sglang", "trtllm")

REQUIRED_COLUMNS = (
    "id", "silicon_data_source", "backend", "backend_version", "model_path", "system", "mode",
    "isl", "osl", "gemm_quant_mode", "batch_size", "tp_size", "pp_size", "attention_dp_size",
    "silicon_ttft_ms", "silicon_tpot_ms",
)  # fmt: skip

# the run's TP (its GPUs) and EP in a public benchmark row's id: "..._tp2_ep2_1741",
# "..._tp2_0_ep2_0_1009" (`dump_layout`)
_RUN_NAME_LAYOUT = re.compile(r"_tp(\d+)(?:_0)?_ep(\d+)(?:_0)?_")


class DatasetError(ValueError):
    """A validation dataset that is missing or malformed (the message names file and field)."""


@dataclass(frozen=True, slots=True)
class ValidationPoint:
    """One measured deployment under one closed-loop workload."""

    id: str
    engine: str  # vllm | sglang | trtllm
    engine_version: str
    model_path: str  # as measured (HF id)
    model: str  # llmcap built-in model name
    system: str  # aiconfigurator system name
    sku: str  # llmcap catalog id
    tp: int
    pp: int
    precision: Precision
    kv_precision: Precision
    isl: int
    osl: int
    concurrency: int
    measured_ttft_ms: float
    measured_tpot_ms: float
    gemm_quant_mode: str = ""
    moe_quant_mode: str = ""  # the row's expert-weight quantisation (for aiconfigurator)
    # the routed experts' precision where the row sets it apart from the checkpoint's own
    # (`checkpoint_precisions`; None: the model's own, else `precision`)
    expert_precision: Precision | None = None
    # the measured checkpoint's weights: "fp8", "fp4", "bf16 + mxfp4 experts" (`weights_label`)
    weights: str = ""
    source: str = ""
    ep: int = 1  # expert parallelism (moe_ep_size) of a mixture-of-experts model
    moe: bool = False  # the model is a mixture of experts
    dp: int = 1  # attention data parallelism (attention_dp_size) of a mixture of experts
    # the client's length spread: each request's prompt and output lengths are drawn
    # uniformly from [int(length_ratio x isl), isl] and [int(length_ratio x osl), osl]
    # (1: fixed lengths); see the module docstring
    length_ratio: float = 1.0
    # server options the campaign's launch scripts set beyond the engine's defaults (module
    # docstring): TensorRT-LLM's batch waiting, as `SchedulerConfig` fields
    batch_wait_iters: int = 0
    batch_wait_token_ratio: float = 0.0
    # ... TensorRT-LLM's attention-DP balance (`SchedulerConfig.adp_balance_timeout_iters`)
    adp_balance_timeout_iters: int = 0
    adp_balance_batching_wait_iters: int = 0
    # ... and SGLang's scheduler_recv_interval (`SchedulerConfig.recv_interval`)
    recv_interval: int = 1
    # ... and the engine's memory plan and limits (`_launch_scripts.launch_limits`): the
    # KV-cache dtype (None: the engine's default for the weights), each attention DP rank's
    # token budget and batch cap under the engine's own names (0: the engine's own, the
    # batch capped at the concurrency) and the engine's memory fraction (0: its own)
    kv_cache_dtype: Precision | None = None
    token_budget: int = 0
    batch_cap: int = 0
    memory_fraction: float = 0.0
    # ... and the batching policy its options amount to, under that token budget (a
    # `simulator.SchedulerKind` value: "orca" where whole prompts join the running decodes,
    # as TensorRT-LLM runs with chunked context off; "": the engine profile's own;
    # `_launch_scripts.py`, `_aic_generator.py`)
    scheduler: str = ""
    # ... and the largest CUDA graph it captures, in tokens (vLLM's
    # max-cudagraph-capture-size; 0: the engine's own, `EngineProfile.piecewise_max_tokens`)
    graph_max_tokens: int = 0
    # ... and the MoE kernel an option or environment variable of it forces (a substring of
    # the MoE tables' kernel_source; "": the engine's default, engines.yaml moe_kernels)
    moe_kernel: str = ""
    # ... and the kernel of the checkpoint's block-FP8 dense GEMMs it forces (engines.yaml
    # fp8_block_gemm; "": the engine's default)
    fp8_block_gemm: str = ""
    # how an MoE layer exchanges attention-DP ranks' tokens under EP where the launch recipe
    # chose it (engines.yaml moe_all_to_all; "": the engine's default)
    moe_all_to_all: str = ""
    # which decode worker of a disaggregated point takes each request, as its frontend routes
    # (simulator.DecodeSpec.router: lor, round_robin, random; `_aic_disagg.py`)
    decode_router: str = "lor"
    # disaggregated serving (`_aic_disagg.py`): the fields above (tp, pp, dp, ep) are then
    # the prefill pool's, `replicas` its workers and `batch_size` its batch cap per attention
    # DP rank (0: not recorded); `decode` the decode pool's shape
    replicas: int = 1
    batch_size: int = 0
    decode: PoolShape | None = None
    # whether the campaign's client warmed the server up before timing (module docstring):
    # "warm-up", "no warm-up" (the mean TTFT may carry the server's cold start), "warm-up or
    # not" (measured while the change was under review) or "" (not recorded)
    client_warmup: str = ""
    # the HTTP frontend the client talked to: "" the engine's own server, DYNAMO_FRONTEND
    # NVIDIA Dynamo's (`dynamo_frontend`), which tokenizes the prompt and hands the engine
    # token ids: the engine's own server, and its latency, are not on the path
    frontend: str = ""

    @property
    def mode(self) -> str:
        return "agg" if self.decode is None else "disagg"

    @property
    def four_bit(self) -> bool:
        """Whether the measured checkpoint holds 4-bit weights (NVFP4, or MXFP4 or INT4
        experts)."""
        return "fp4" in self.weights or "int4" in self.weights

    @property
    def mean_output_tokens(self) -> float:
        """The mean output length the client asks for: `osl`, or the middle of
        [int(length_ratio x osl), osl] where it spreads the lengths."""
        if self.length_ratio >= 1.0:
            return float(self.osl)
        return (max(int(self.osl * self.length_ratio), 1) + self.osl) / 2

    def requests_per_second(self, ttft_ms: float, tpot_ms: float) -> float:
        """The closed loop's request throughput at this point's concurrency given a mean TTFT
        and TPOT (the measured ones, or a prediction): each of its C clients always has one
        request in flight, so by Little's law throughput = C / mean end-to-end latency, and a
        request's end-to-end latency is its TTFT plus (output tokens - 1) x its TPOT.  NaN
        where either is not a positive number."""
        if not (ttft_ms > 0 and tpot_ms > 0):
            return math.nan
        e2e_ms = ttft_ms + (self.mean_output_tokens - 1) * tpot_ms
        return self.concurrency / (e2e_ms * 1e-3)

    @property
    def measured_requests_per_second(self) -> float:
        """The request throughput the measured means imply (`requests_per_second`)."""
        return self.requests_per_second(self.measured_ttft_ms, self.measured_tpot_ms)

    @property
    def deployment(self) -> ValidationPoint:
        """The point with what only its measurement records blanked (`_MEASUREMENT_ONLY`):
        two points equal here ran the same deployment under the same client load, so the
        simulator answers both alike, and their measurements differ only by the run."""
        return replace(self, **_MEASUREMENT_ONLY)


# the fields of a `ValidationPoint` that say how it was measured, not what ran: its id and
# means, the client's warm-up, the campaign, the checkpoint's name (DeepSeek-R1 and -V3 run
# one architecture), aiconfigurator's names of the system and the experts' quantisation
_MEASUREMENT_ONLY: dict[str, Any] = {
    "id": "", "measured_ttft_ms": 0.0, "measured_tpot_ms": 0.0, "client_warmup": "",
    "source": "", "model_path": "", "system": "", "moe_quant_mode": "",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class PoolShape:
    """The decode pool of a disaggregated point: `replicas` workers of `dp` x `tp` GPUs (MoE
    experts over `ep` of them), each attention DP rank batching at most `batch_size`
    requests (0: not recorded), taking in new requests every `recv_interval` decode
    iterations (`SchedulerConfig.recv_interval`), its servers launched with memory fraction
    `memory_fraction` (0: the engine's own plan)."""

    tp: int
    replicas: int = 1
    dp: int = 1
    ep: int = 1
    batch_size: int = 0
    recv_interval: int = 1
    memory_fraction: float = 0.0


MODEL_KINDS = ("dense", "moe", "all")  # `select_points(models=...)`
# the skip reason of a row repeating a kept row's measurement: the same deployment, workload
# and measured TTFT and TPOT (`_measurement`; the benchmark's dumps copy their rows)
REPEATED = "repeat of another row's measurement"
# the skip reason of a row that another campaign's file copied from a benchmark dump, its
# means rounded to 0.01 ms (`_dump_copy_key`)
DUMP_COPY = "copy of a benchmark dump's measurement, rounded"
RACK_LAYOUT = "rack-scale layout not recorded (tp_size > 8 on an NVL72 rack)"
# the skip reason of an aggregated row whose load ran on more workers or attention-DP ranks
# than it records (`unrecorded_workers`)
UNRECORDED_WORKERS = "workers not recorded (concurrency is not batch_size x attention_dp_size)"

# the skip reason of an aggregated row whose run decoded fewer requests together than its
# concurrency says (`unheld_concurrency`)
UNHELD_CONCURRENCY = (
    "concurrency not held (TPOT under 0.75x the same deployment's at 1/8 the clients or fewer)"
)
UNHELD_LOAD_FACTOR = 8  # `unheld_concurrency`: how much lighter the comparison runs are
UNHELD_TPOT_RATIO = 0.75  # ... and how far below theirs a TPOT must fall

MODES = ("agg", "disagg", "all")  # `select_points(modes=...)`


@dataclass(slots=True)
class Selection:
    """The points kept and, per reason, how many rows were skipped."""

    points: list[ValidationPoint]
    total_rows: int
    skipped: Counter[str] = field(default_factory=Counter)


def kv_precision_for(engine: str, precision: Precision) -> Precision:
    """The KV-cache precision each engine uses by default with these weights.

    TensorRT-LLM serves FP8 (ModelOpt) checkpoints with an FP8 KV cache; vLLM and SGLang
    keep a 16-bit KV cache unless told otherwise (`--kv-cache-dtype`).  Where a point's
    launch script sets the dtype, that wins (`_launch_scripts.launch_limits`).
    """
    if precision.low:  # FP8 or NVFP4 weights
        return Precision.FP8 if engine == "trtllm" else Precision.BF16
    return precision


def catalog_model_name(model_path: str) -> str | None:
    """The built-in model a measured HF id stands for (same architecture), or None.

    `nvidia/Llama-3.1-8B-Instruct-FP8` and `meta-llama/Llama-3.1-8B-Instruct` are the
    architecture of `meta-llama/Llama-3.1-8B` (`load_model` resolves such variants).
    """
    found = _catalog_model(model_path)
    return found.name if found is not None else None


def _catalog_model(model_path: str) -> ModelArchitecture | None:
    """The built-in architecture of a measured HF id, or None."""
    try:
        return load_model(model_path)
    except ValueError:  # UnknownModelError, or a name that looks like a path and is not one
        return None


def checkpoint_precisions(
    model: ModelArchitecture, gemm: str, moe: str
) -> tuple[Precision, Precision | None] | str:
    """(weight precision, routed-expert precision or None for the checkpoint's own) of a row
    as the measured checkpoint stores its weights, or why llmcap cannot say.

    The rows name NVIDIA's NVFP4 checkpoints ``nvfp4`` (DeepSeek-R1/V3: NVFP4 but the MLA
    latent projections, router and LM head; Llama-3.1-70B: every linear layer but the LM
    head) and label a model whose own checkpoint keeps 4-bit experts apart (gpt-oss: MXFP4
    experts, everything else 16-bit) the same way: that is its checkpoint, 16-bit weights
    and its own experts; Kimi-K2.5's own INT4 checkpoint is ``int4_wo`` (`OWN_INT4`: 16-bit
    weights, its INT4 experts), its NVFP4 one ``nvfp4`` (NVFP4 experts).  A row's
    ``moe_quant_mode`` sets the experts of other rows (gpt-oss on TensorRT-LLM ``fp8``: FP8
    experts)."""
    own = model.expert_precision
    if gemm == OWN_INT4 and own is Precision.INT4:
        precision: Precision | None = Precision.BF16  # the rest of that checkpoint
    else:
        precision = GEMM_TO_PRECISION.get(gemm)
    if precision is None:
        return f"weight precision not modelled ({gemm})"
    if not model.is_moe:
        return precision, None
    if own is Precision.MXFP4 and precision is Precision.FP4:
        return Precision.BF16, None
    if moe not in MOE_TO_PRECISION:
        return f"expert precision not modelled ({moe})"
    experts = MOE_TO_PRECISION[moe]
    if experts is None or experts is (own or precision):
        return precision, None
    return precision, experts


def read_silicon_csv() -> tuple[str, list[dict[str, str]]]:
    """(where it was read from, rows) of the installed silicon_sample.csv."""
    try:
        root = resources.files(PACKAGE)
    except ModuleNotFoundError:
        raise DatasetError(
            f"the aic-silicon dataset needs the optional package aiconfigurator-core: "
            f"{INSTALL_HINT}"
        ) from None
    entry = root.joinpath(*RESOURCE)
    where = f"{PACKAGE}/{'/'.join(RESOURCE)}"
    try:
        text = entry.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read {where}: {exc}") from None
    return where, parse_rows(text, where)


def parse_rows(text: str, where: str) -> list[dict[str, str]]:
    """CSV rows as dicts, after checking the columns this loader reads."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise DatasetError(f"{where}: missing column(s) {', '.join(missing)}")
    return list(reader)


def select_points(
    rows: list[dict[str, str]],
    where: str = "silicon_sample.csv",
    models: str = "dense",
    modes: str = "agg",
) -> Selection:
    """The rows llmcap can simulate, mapped to its names; the others counted by reason.
    `models`: the dense points, the mixture-of-experts ones (moe) or all; `modes`: the
    aggregated points, the disaggregated ones (disagg) or all."""
    if models not in MODEL_KINDS:
        raise ValueError(f"models must be one of {', '.join(MODEL_KINDS)}, got {models!r}")
    if modes not in MODES:
        raise ValueError(f"modes must be one of {', '.join(MODES)}, got {modes!r}")
    from search._validate._aic_disagg import map_disagg_row

    selection = Selection(points=[], total_rows=len(rows))
    dumped = {_dump_copy_key(row) for row in rows if _row_source(row) == BENCHMARK_DB} - {None}
    mapped: list[ValidationPoint | str] = []
    for line, row in enumerate(rows, start=2):
        disagg = row["mode"] != "agg"
        if _row_source(row) != BENCHMARK_DB and _dump_copy_key(row) in dumped:
            mapped.append(DUMP_COPY)
        elif disagg and modes == "agg":
            mapped.append("disaggregated (prefill/decode pools)")
        elif not disagg and modes == "disagg":
            mapped.append("aggregated (not in --modes disagg)")
        elif disagg:
            mapped.append(map_disagg_row(row, where, line))
        else:
            mapped.append(_map_row(row, where, line))
    records = [
        (point, row["silicon_data_source"] or "")
        for point, row in zip(mapped, rows, strict=True)
        if not isinstance(point, str)
    ]
    unusable = {
        **mtp_sweep_runs(records),
        **speculative_twins(records),
        **unheld_concurrency(point for point, _ in records),
    }
    measured: set[ValidationPoint] = set()  # each kept measurement (`_measurement`)
    for point_or_reason in mapped:
        if not isinstance(point_or_reason, str) and point_or_reason.id in unusable:
            point_or_reason = unusable[point_or_reason.id]
        point = None if isinstance(point_or_reason, str) else point_or_reason
        if point is not None and models != "all" and point.moe != (models == "moe"):
            kind = "mixture-of-experts" if point.moe else "dense"
            point_or_reason = f"{kind} model (not in --models {models})"
        if point is not None and not isinstance(point_or_reason, str):
            measurement = _measurement(point)
            if measurement in measured:  # a later dump's copy of the same measurement
                point_or_reason = REPEATED
            measured.add(measurement)
        if isinstance(point_or_reason, str):
            selection.skipped[point_or_reason] += 1
        else:
            selection.points.append(point_or_reason)
    return selection


def unheld_concurrency(points: Iterable[ValidationPoint]) -> dict[str, str]:
    """The ids of the aggregated points whose run cannot have decoded its concurrency's
    requests together, each with the reason: its TPOT is under `UNHELD_TPOT_RATIO` of the
    TPOT the same deployment (engine, GPU, model, weights, layout and lengths, any release)
    measured with `UNHELD_LOAD_FACTOR` times fewer clients or fewer still.

    A decode step does not get shorter as its batch grows: eight times the sequences read
    eight times the KV cache and run eight times the GEMM rows over the same weights.  So a
    run at C clients that decoded faster than one at C / 8 held far fewer than C requests in
    flight (failed requests, a client that stalled), and its means describe a load it does
    not record.  Evidence, on aiconfigurator-core 0.12.0's sample: six public vLLM
    gpt-oss-120b rows on H100 at concurrency 512 (TP 2-8, three recording vLLM 0.11.2 and
    three no version) measure TPOT 3.6-5.6 ms, 0.30-0.50 of the same deployments' at
    concurrency 32-64 under vLLM 0.18, and TTFT 20-118 s.  The ratio's margin is wide: of
    the 950 other aggregated points with such lighter runs, none falls below 1.01, so a ratio
    anywhere from 0.51 to 1.01 skips the same six.  The three 512-client rows of those
    deployments whose TPOT matches the lighter runs' (1.02-1.03, TTFT 113-462 s) stay: a run
    holding about a hundred requests at a time, as their TTFT and TPOT imply, is a load a
    simulator can be asked about."""
    by_deployment: dict[tuple[Any, ...], list[ValidationPoint]] = defaultdict(list)
    for point in points:
        if point.mode == "agg":
            key = (point.engine, point.sku, point.model, point.weights, point.precision,
                   point.tp, point.pp, point.ep, point.dp, point.isl, point.osl)  # fmt: skip
            by_deployment[key].append(point)
    unheld: dict[str, str] = {}
    for runs in by_deployment.values():
        for point in runs:
            lighter = [
                run.measured_tpot_ms
                for run in runs
                if run.concurrency * UNHELD_LOAD_FACTOR <= point.concurrency
            ]
            if lighter and point.measured_tpot_ms < UNHELD_TPOT_RATIO * max(lighter):
                unheld[point.id] = UNHELD_CONCURRENCY
    return unheld


def _measurement(point: ValidationPoint) -> ValidationPoint:
    """What identifies `point`'s measurement across the dumps' copies of it: its deployment,
    workload and measured means to nine digits (copies print the last digit differently),
    without its row id, the HF id it was filed under (DeepSeek-V3 or -R1) or the engine
    version one copy may leave out."""
    return replace(
        point, id="", model_path="", engine_version="",
        measured_ttft_ms=float(f"{point.measured_ttft_ms:.9g}"),
        measured_tpot_ms=float(f"{point.measured_tpot_ms:.9g}"),
    )  # fmt: skip


def _dump_copy_key(row: dict[str, str]) -> tuple[str, ...] | None:
    """What identifies a benchmark dump's measurement in a file that copied it: the
    deployment, workload, concurrency and measured means to 0.01 ms (None: a mean missing).
    NVIDIA's gap-analysis files for Kimi-K2.5 and Qwen3.5-397B
    (`source_file=kimi-k2.5-gap-analysis.csv`, ...) carry the dumps' rows with their means
    rounded so; read as NVIDIA's own fixed-length runs they would count one measurement
    twice, the second time under a client it did not have.  The layout is left out: the
    copies record it their own way (batch_size the concurrency where the dump records it per
    attention DP rank, `dump_layout`)."""
    try:
        means = [f"{float(row[name]):.2f}" for name in ("silicon_ttft_ms", "silicon_tpot_ms")]
    except ValueError:
        return None
    model = catalog_model_name(row["model_path"]) or row["model_path"]
    concurrency = record_field(row["silicon_data_source"] or "", "silicon_concurrency")
    fields = ("system", "backend", "mode", "isl", "osl")
    return (model, *(row[name] for name in fields), concurrency, *means)


def load_aic_silicon(models: str = "dense", modes: str = "agg") -> Selection:
    """Read the installed silicon_sample.csv and select the points llmcap can simulate."""
    where, rows = read_silicon_csv()
    return select_points(rows, where, models, modes)


@dataclass(frozen=True, slots=True)
class RowBasics:
    """What every mode's row shares: where it ran, on what, and at which concurrency."""

    sku: str
    engine: str
    gemm: str
    precision: Precision
    model: str
    moe: bool
    concurrency: int
    expert_precision: Precision | None = None  # set apart from the checkpoint's own
    moe_quant: str = ""  # the row's moe_quant_mode
    weights: str = ""  # `weights_label`


def row_basics(row: dict[str, str]) -> RowBasics | str:
    """The row's GPU, engine, precision, model and concurrency, or why llmcap lacks one."""
    sku = SYSTEM_TO_SKU.get(row["system"])
    if sku is None:
        return f"GPU not in the catalog ({row['system']})"
    engine = row["backend"]
    if engine not in ENGINES:
        return f"unknown engine ({engine})"
    gemm = (row["gemm_quant_mode"] or "").strip()
    if gemm not in GEMM_TO_PRECISION and gemm != OWN_INT4:
        return f"weight precision not modelled ({gemm})"
    model = _catalog_model(row["model_path"])
    if model is None:
        return "model not in the catalog (unknown architecture)"
    moe_quant = (row.get("moe_quant_mode") or "").strip() if model.is_moe else ""
    precisions = checkpoint_precisions(model, gemm, moe_quant)
    if isinstance(precisions, str):
        return precisions
    precision, experts = precisions
    concurrency = record_field(row["silicon_data_source"] or "", "silicon_concurrency")
    if not concurrency.isdigit():
        return "no concurrency recorded"
    return RowBasics(
        sku, engine, gemm, precision, model.name, model.is_moe, int(concurrency), experts,
        moe_quant, weights_label(model, precision, experts),
    )


def weights_label(
    model: ModelArchitecture, precision: Precision, experts: Precision | None
) -> str:
    """The weights a point runs with: its precision, and its experts' where they differ
    ("bf16 + mxfp4 experts")."""
    effective = experts or model.expert_precision or precision
    if not model.is_moe or effective is precision:
        return precision.value
    return f"{precision.value} + {effective.value} experts"


@functools.cache
def node_gpus(sku: str) -> int:
    """GPUs in the largest node of the catalog's `sku` (one NVLink domain)."""
    return max(n.gpus_per_node for n in load_catalog().get(sku).nodes)


@functools.cache
def sku_family(sku: str) -> str:
    """The catalog's GPU family of `sku` (hopper, blackwell, ...)."""
    return load_catalog().get(sku).family


def parallelism(
    row: dict[str, str], prefix: str, basics: RowBasics, where: str, line: int
) -> tuple[int, int, int, int] | str:
    """(tp, pp, dp, ep) of the row's columns `{prefix}tp_size` ... (a pool's, under a prefix
    such as `decode_`), or why llmcap cannot represent them."""
    tp = _int(row, f"{prefix}tp_size", where, line)
    pp = _int(row, f"{prefix}pp_size", where, line)
    dp = _int(row, f"{prefix}attention_dp_size", where, line, default=1)
    if dp > 1 and not basics.moe:
        return "attention data parallelism of a dense model"
    node = node_gpus(basics.sku)
    if tp > node:
        return f"TP beyond one node ({prefix}tp_size > {node} GPUs)"
    if load_model(basics.model).num_attention_heads % tp:
        return f"TP does not divide the attention heads ({prefix}tp_size)"
    ep = 1
    if basics.moe:
        ep = _int(row, f"{prefix}moe_ep_size", where, line, default=1)
        moe_tp = _int(row, f"{prefix}moe_tp_size", where, line, default=1)
        if ep * moe_tp != tp * dp:
            return "MoE TP x EP differs from attention DP x TP"
    return tp, pp, dp, ep


def dump_layout(row: dict[str, str], engine: str, node_gpus: int) -> dict[str, str]:
    """The row with the parallel layout it ran, where a later benchmark dump (`db-dump/...`,
    `source_file=2026-04-06.csv`) records it multiplied by the expert parallelism E, as
    every one of its 89 rows whose measurement `source_file=2026-03-25.csv` also holds
    (to nine digits) shows against that copy's layout (the rule is checked by
    tests/search/test_validate.py on the installed file):

    - TP x EP: tp_size = T x E, moe_tp_size = T, moe_ep_size = E -> TP T, MoE TP T / E, EP E;
    - attention DP x EP: attention_dp_size = D x E, moe_tp_size = D -> DP D, MoE TP D / E;
    - vLLM's expert parallelism over its TP group (it runs no attention DP there, but for
      the configurations whose launch script does: `_launch_scripts.attention_dp_launch`):
      attention_dp_size = T, moe_tp_size = 1, moe_ep_size = T x T -> TP T, EP T.

    The first two are recognised by more GPUs than one node holds (the benchmark runs on one
    node), or, where the multiplied T x E GPUs fit one node, by the run's own name in the
    row's id (``..._tp2_ep2_...``: T GPUs, EP E): a recorded MoE TP T with EP E is the name's
    T and E, which no layout that ran records (its MoE TP is T / E); the third by its vLLM
    attention DP.  Other rows are returned as they are."""
    try:
        tp, dp, moe_tp, ep = (
            int(float(row.get(name) or 1))
            for name in ("tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
        )
    except ValueError:
        return row  # the checks of `parallelism` name the field
    named = _RUN_NAME_LAYOUT.search(row.get("id") or "")
    named_multiplied = named is not None and (int(named[1]), int(named[2])) == (moe_tp, ep)
    fields: dict[str, int] | None = None
    if engine == "vllm" and dp > 1 and moe_tp == 1 and ep == dp * dp and tp == dp:
        fields = {"attention_dp_size": 1, "moe_ep_size": dp}
    elif (
        (tp * dp > node_gpus or named_multiplied)
        and ep > 1 and moe_tp % ep == 0 and moe_tp <= node_gpus
    ):  # fmt: skip
        if dp == 1 and tp == moe_tp * ep:
            fields = {"tp_size": moe_tp, "moe_tp_size": moe_tp // ep}
        elif tp == 1 and dp == moe_tp * ep:
            fields = {"attention_dp_size": moe_tp, "moe_tp_size": moe_tp // ep}
    if fields is None:
        return row
    return {**row, **{name: str(value) for name, value in fields.items()}}


def unrecorded_workers(row: dict[str, str], concurrency: int, where: str, line: int) -> bool:
    """Whether an aggregated row's concurrency ran on more workers or attention-DP ranks than
    the row records.

    Both campaigns record the batch of each attention-DP rank of the one worker they ran:
    concurrency = batch_size x attention_dp_size (an empty or zero DP size counting 1), as
    3,577 of the file's 3,607 aggregated rows with a concurrency have it (as recorded, before
    a dump's multiplied layout is read back: `dump_layout`).  29 of the other 30 are NVIDIA's
    own TensorRT-LLM runs (DeepSeek-R1/V3.1 NVFP4 at TP 4-8 with EP, gpt-oss-120b on H100,
    Qwen3-32B on GB200 and B200) whose concurrency is 2 to 32 times that, their load spread
    over workers or attention-DP ranks the row does not name: Qwen3-32B NVFP4 at TP 2 measures
    a 0.7 s TTFT at concurrency 416 with 15,000-token prompts and a batch of 13, which no
    single TP 2 worker could prefill, while DeepSeek's TP 8 x EP 8 rows could as well be
    attention DP 8 on one worker.  The 30th, a public DeepSeek-R1 row of a speculative sweep
    (`mtp_sweep_runs`), records attention DP 64 with a batch of its whole concurrency.  Which
    layout ran cannot be told, so such a row is skipped."""
    if not (row.get("batch_size") or "").strip():
        return False  # no batch recorded: nothing to hold the concurrency against
    ranks = _int(row, "attention_dp_size", where, line, default=1)
    return concurrency != _int(row, "batch_size", where, line) * ranks


def _map_row(row: dict[str, str], where: str, line: int) -> ValidationPoint | str:
    basics = row_basics(row)
    if isinstance(basics, str):
        return basics
    if unrecorded_workers(row, basics.concurrency, where, line):
        return UNRECORDED_WORKERS
    if _row_source(row) == BENCHMARK_DB:
        node = node_gpus(basics.sku)
        row = dump_layout(row, basics.engine, node)
        if node > 8 and _int(row, "tp_size", where, line) > 8:
            # GB200's public DeepSeek-R1 rows at TP 12-72 on the NVL72 rack run wide EP
            # with attention DP, a layout the dump does not record
            return RACK_LAYOUT
    shape = parallelism(row, "", basics, where, line)
    if isinstance(shape, str):
        return shape
    tp, pp, dp, ep = shape
    point = measured_point(
        row, basics, where, line, tp=tp, pp=pp, dp=dp, ep=ep, client_warmup=_client_warmup(row),
        frontend=DYNAMO_FRONTEND if dynamo_frontend(row) else "",
    )  # fmt: skip
    speculative = speculative_run(point)
    if speculative is not None:
        return speculative
    if attention_dp_launch(point, row["silicon_data_source"] or ""):
        tp, dp = 1, tp * dp  # the script's --tensor-parallel-size=1 --data-parallel-size=$TP
        point = replace(point, tp=tp, dp=dp)
    options = {**server_options(point, tp, dp), **generated_options(point)}
    return replace(point, **options) if options else point


def measured_point(
    row: dict[str, str], basics: RowBasics, where: str, line: int, **fields: Any
) -> ValidationPoint:
    """The fields every row gives (engine, model, GPU, precision, lengths, concurrency, the
    measured means, the campaign and its client), with the row's own parallelism `fields`
    on top."""
    source = _row_source(row)
    common = dict(
        id=row["id"],
        engine=basics.engine,
        engine_version=row["backend_version"] or "",
        model_path=row["model_path"],
        model=basics.model,
        system=row["system"],
        sku=basics.sku,
        precision=basics.precision,
        expert_precision=basics.expert_precision,
        weights=basics.weights,
        kv_precision=kv_precision_for(basics.engine, basics.precision),
        isl=_int(row, "isl", where, line),
        osl=_int(row, "osl", where, line),
        concurrency=basics.concurrency,
        measured_ttft_ms=_float(row, "silicon_ttft_ms", where, line),
        measured_tpot_ms=_float(row, "silicon_tpot_ms", where, line),
        gemm_quant_mode=basics.gemm,
        moe_quant_mode=basics.moe_quant,
        source=source,
        moe=basics.moe,
        length_ratio=LENGTH_RATIO[source],
    )
    return ValidationPoint(**{**common, **fields})


# when the public benchmark's client took warm-up requests (module docstring): InferenceMAX
# PR #480 opened on the first date, and its warm-up code was upstream by the second
CLIENT_WARMUP_OPENED = datetime.date(2026, 1, 17)
CLIENT_WARMUP_UPSTREAM = datetime.date(2026, 2, 3)
# `ValidationPoint.client_warmup`
WARMED_UP, NOT_WARMED_UP, WARMUP_EITHER = "warm-up", "no warm-up", "warm-up or not"


# `ValidationPoint.frontend` of a point served behind NVIDIA Dynamo's frontend
DYNAMO_FRONTEND = "dynamo"
# Dynamo's images on NGC, as a Docker reference or as the enroot/pyxis one Slurm jobs write
# (`nvcr.io#nvidia/ai-dynamo/...`: 110 disaggregated TensorRT-LLM rows, of models or layouts
# llmcap skips today)
_DYNAMO_IMAGES = ("nvcr.io/nvidia/ai-dynamo/", "nvcr.io#nvidia/ai-dynamo/")


def dynamo_image(row: dict[str, str]) -> bool:
    """Whether the row was run from one of Dynamo's images."""
    source = row["silicon_data_source"] or ""
    return any(image in source for image in _DYNAMO_IMAGES)


def dynamo_frontend(row: dict[str, str]) -> bool:
    """Whether the row's client talked to NVIDIA Dynamo's frontend rather than the engine's
    own server: NVIDIA's own runs (`aiconfigurator eval` starts every deployment behind
    Dynamo's frontend, `_aic_generator.py`) and the rows run from a Dynamo image."""
    return _row_source(row) == AIC_COLLECTION or dynamo_image(row)


def _client_warmup(row: dict[str, str]) -> str:
    """Whether the public benchmark's single-node client warmed the server up before timing
    an aggregated row, by its measurement date (module docstring); "" for other campaigns."""
    text = row["silicon_data_source"] or ""
    if _source(text) != BENCHMARK_DB:
        return ""
    try:
        measured = datetime.date.fromisoformat(measured_date(text))
    except ValueError:  # no date recorded
        return ""
    if measured < CLIENT_WARMUP_OPENED:
        return NOT_WARMED_UP
    return WARMED_UP if measured > CLIENT_WARMUP_UPSTREAM else WARMUP_EITHER


# each campaign's client length spread (`ValidationPoint.length_ratio`; module docstring)
BENCHMARK_DB, AIC_COLLECTION = "benchmark-db", "aic-collection"  # `_source`
LENGTH_RATIO = {BENCHMARK_DB: 0.8, AIC_COLLECTION: 1.0}


# the benchmark dumps that the file names by their own file name (module docstring)
_BENCHMARK_DUMPS = frozenset({"source_file=2026-04-06.csv", "source_file=2026-03-25.csv"})


def _source(text: str) -> str:
    """Which campaign measured the point: a public benchmark dump or NVIDIA's own runs."""
    first = text.split(";", 1)[0].strip()
    if first.startswith("db-dump") or first in _BENCHMARK_DUMPS:
        return BENCHMARK_DB
    return AIC_COLLECTION


def _row_source(row: dict[str, str]) -> str:
    return _source(row["silicon_data_source"] or "")


def _int(row: dict[str, str], name: str, where: str, line: int, default: int | None = None) -> int:
    """A positive integer field; an empty or zero cell is `default` where one is given."""
    value = (row.get(name) or "").strip()
    try:
        number = float(value) if value else 0.0
    except ValueError:
        number = math.nan
    if math.isfinite(number) and number == int(number) and number >= 1:
        return int(number)
    if default is not None and number == 0:
        return default
    raise DatasetError(
        f"{where} line {line}: field {name} must be a positive integer, got {value!r}"
    )


def _float(row: dict[str, str], name: str, where: str, line: int) -> float:
    value = (row.get(name) or "").strip()
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number <= 0:
        raise DatasetError(
            f"{where} line {line}: field {name} must be a positive number, got {value!r}"
        )
    return number
