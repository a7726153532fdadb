"""The `llmcap` command line."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from search._cli_common import emit_records, print_table, records_options, user_errors

# Command groups imported only when they run (the database, Ray, Optuna and plotting stay
# unloaded for `llmcap --help` and `llmcap simulate`): name -> (module:attribute, the short
# first line of its help, which `llmcap --help` lists; a test checks it against the command).
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "search": (
        "search._cli_search:search_group",
        "Run search jobs: find the deployment with the most QPS per dollar within the SLOs.",
    ),
    "jobs": ("search._cli_search:jobs_group", "Search jobs recorded in the results database."),
    "results": (
        "search._cli_results:results_group",
        "Query a job's results (JOB defaults to the latest job).",
    ),
    "pareto": (
        "search._cli_results:pareto_group",
        "Pareto frontiers of a job: QPS per dollar against latency.",
    ),
    "validate": (
        "search._cli_validate:validate",
        "Simulate measured deployments and print the error table.",
    ),
    "plan": (
        "search._cli_plan:plan_group",
        "Capacity plans: fleets and costs for forecast traffic, and what changed since last run.",
    ),
    "profile": (
        "search._cli_profile:profile_group",
        "Measure operator times on this machine, or import Vidur's, as op tables.",
    ),
}


class LazyGroup(click.Group):
    """A group whose `LAZY_COMMANDS` are imported when invoked (or asked for their help)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *LAZY_COMMANDS])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS:
            module, attribute = LAZY_COMMANDS[cmd_name][0].split(":")
            return getattr(importlib.import_module(module), attribute)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            limit = formatter.width - 6 - len(name)
            if name in LAZY_COMMANDS:
                short = click.Command(name, help=LAZY_COMMANDS[name][1]).get_short_help_str(limit)
                rows.append((name, short))
                continue
            command = super().get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="llmcap")
def cli() -> None:
    """llmcap: find the LLM deployment with the most queries per second per dollar.

    \b
    Start with:
      llmcap simulate --help                 one deployment under one workload
      llmcap search run examples/quick.yaml  search a space of deployments
      llmcap results best                    the recommended deployment of the latest job
      llmcap pareto plot --out pareto.png    QPS per dollar against latency
      llmcap catalog skus                    the GPUs you can deploy on, with prices
      llmcap catalog models                  the built-in model architectures
      llmcap catalog workloads               the built-in workloads and their lengths
      llmcap catalog op-tables               operator tables measured on GPUs
      llmcap validate                        the simulator against measured results
      llmcap profile run --help              measure operator tables on your GPU
      llmcap plan run examples/capacity_plan.yaml  fleets and costs for forecast traffic
    """


# -- catalog -----------------------------------------------------------------


@cli.group()
def catalog() -> None:
    """Show the built-in GPU SKUs and model architectures."""


@catalog.command("skus")
@click.option(
    "--catalog",
    "catalog_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A YAML file that adds SKUs or overrides fields (e.g. prices); repeatable.",
)
@click.option("--wide", is_flag=True, help="Every column: names, links, price date and source.")
@records_options
@user_errors
def catalog_skus(catalog_files: tuple[Path, ...], wide: bool, fmt: str | None) -> None:
    """GPU SKUs: memory, bandwidth, peak FLOP/s, node shapes and price per GPU-hour."""
    from dataclasses import asdict

    from sku_catalog import format_sku_table, load_catalog

    catalog = load_catalog(catalog_files)
    if fmt:
        emit_records([asdict(s) for s in catalog.skus()], fmt)
        return
    print_table(format_sku_table(catalog, wide=wide), whole=wide)


@catalog.command("models")
@click.option("--wide", is_flag=True, help="Also head dim, intermediate size and vocabulary.")
@records_options
def catalog_models(wide: bool, fmt: str | None) -> None:
    """Built-in model architectures (any local HF config.json also works with --model PATH)."""
    from dataclasses import asdict

    from estimators import builtin_model_names, format_model_table, load_model

    if fmt:
        models = [load_model(name) for name in builtin_model_names()]
        counts = [{"num_params": m.num_params, "active_params": m.active_params} for m in models]
        emit_records([asdict(m) | c for m, c in zip(models, counts, strict=True)], fmt)
        return
    print_table(format_model_table(wide=wide), whole=wide)


@catalog.command("workloads")
@click.option("--wide", is_flag=True, help="Also each workload's description and max lengths.")
@records_options
def catalog_workloads(wide: bool, fmt: str | None) -> None:
    """Built-in workloads (`workload: {source: NAME}`) and their length statistics."""
    from rich import box
    from rich.table import Table

    from workloads import builtin_length_statistics

    rows = builtin_length_statistics()
    if fmt:
        emit_records(rows, fmt)
        return
    table = Table(
        title="Built-in workloads: prompt (in) and output (out) tokens, 20,000 draws",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )  # fmt: skip
    columns = ["prompt_mean", "prompt_p50", "prompt_p99", "output_mean", "output_p50",
               "output_p99"]  # fmt: skip
    if wide:
        columns += ["prompt_max", "output_max"]
    table.add_column("name", style="bold", no_wrap=True)
    for col in columns:
        header = col.replace("prompt_", "in ").replace("output_", "out ")
        table.add_column(header, justify="right", no_wrap=True)
    if wide:
        table.add_column("description")
    for row in rows:
        cells = [f"{row[c]:,.0f}" for c in columns]
        table.add_row(str(row["name"]), *cells, *([str(row["description"])] if wide else []))
    print_table(table, whole=wide)


# the operator-table kinds as `catalog op-tables` names them (the attention tables by phase)
_OPERATOR_NAMES = {"context_attention": "prefill", "generation_attention": "decode"}


@catalog.command("op-tables")
@records_options
def catalog_op_tables(fmt: str | None) -> None:
    """Operator tables that ship with llmcap, measured on real GPUs by `llmcap profile run`
    (`--estimator profiled --op-tables NAME`)."""
    from rich import box
    from rich.table import Table

    from estimators import load_op_tables, shipped_op_tables

    rows = []
    for name in shipped_op_tables():
        tables = load_op_tables(name)
        meta = tables.meta
        dtypes = meta.dtype if isinstance(meta.dtype, list) else [meta.dtype]
        kinds = [_OPERATOR_NAMES.get(kind, kind) for kind in tables.kinds]
        rows.append({
            "name": name, "sku": meta.sku, "gpu": meta.gpu_name, "model": meta.model,
            "tp": ",".join(map(str, meta.tp or [])), "gemm_dtypes": ",".join(dtypes),
            "operators": ",".join(kinds), "date": meta.date[:10], "torch": meta.torch,
            "driver": meta.driver,
        })  # fmt: skip
    if fmt:
        emit_records(rows, fmt)
        return
    table = Table(
        title="Shipped operator tables (--op-tables NAME)", title_justify="left",
        box=box.SIMPLE_HEAD,
    )  # fmt: skip
    columns = ["name", "gpu", "tp", "gemm_dtypes", "operators", "date"]
    for col in columns:
        table.add_column(col.replace("_", " "), no_wrap=True)
    for row in rows:
        table.add_row(*(str(row[c] or "") for c in columns))
    print_table(table)


# -- simulate ----------------------------------------------------------------

# workloads.LENGTH_SPEC_FORMS, written out rather than imported so that `llmcap --help` does
# not load numpy (tests/search/test_cli_startup.py keeps the two the same)
LENGTH_SPEC_FORMS = (
    "N or fixed:N, uniform:LOW:HIGH, zipf:THETA:LOW:HIGH, lognormal:MEDIAN:SIGMA[:MAX], "
    "trace:PATH[:prompt|output]"
)

SIMULATE_EPILOG = f"""
\b
Examples:
  llmcap simulate --qps 4
  llmcap simulate --model meta-llama/Llama-2-70b-hf --sku h100-sxm --tp 4 \\
      --scheduler vllm --batch-size 256 --workload chat --qps 10 --num-requests 2000
  llmcap simulate --workload path/to/AzureLLMInferenceTrace_conv.csv --num-requests 5000
  llmcap simulate --workload chat --prompt-len lognormal:1000:0.8:8192 --output-len fixed:256 \\
      --concurrency 32
  llmcap simulate --config run.yaml --json > summary.json
  llmcap simulate --workload mooncake_conversation.jsonl --qps 1 --num-requests 2000 \\
      --prefix-cache-tokens unbounded   # hash_ids feed the prefix cache; hit rate printed
  llmcap simulate --model meta-llama/Llama-3.1-8B --sku h100-sxm --concurrency 8 \\
      --speculative eagle --num-speculative-tokens 3 --acceptance-rate 0.7
  llmcap simulate --model meta-llama/Llama-3.1-70B --sku h100-sxm --tp 4 \\
      --decode-sku h200 --decode-tp 4 --decode-replicas 1 --qps 4   # prefill / decode pools
  llmcap simulate --model meta-llama/Llama-3.1-8B --sku h100-sxm --estimator profiled \\
      --op-tables tables/h100-llama8b        # tables from `llmcap profile run`
  llmcap simulate --model meta-llama/Llama-3.1-70B --sku h200 --tp 4 --estimator profiled \\
      --op-tables h200/llama-3.1-70b         # shipped tables: `llmcap catalog op-tables`

\b
Workload sources: a built-in name (chat, code, summarization, fixed-1k-128), or a trace file:
Azure LLM inference 2023 CSV, Vidur trace CSV, Mooncake JSONL, or any CSV (see --trace-format).
Length specs (--prompt-len, --output-len):
  {LENGTH_SPEC_FORMS}.
"""


def _choice(enum_values: list[str]) -> click.Choice:
    return click.Choice(enum_values, case_sensitive=False)


@cli.command(epilog=SIMULATE_EPILOG)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="YAML file with any of these options (keys as below, dashes or underscores); "
    "options given on the command line override it.",
)
@click.option(
    "--model",
    default="meta-llama/Llama-2-7b-hf",
    show_default=True,
    help="Built-in model name (see `llmcap catalog models`) or path to a HF config.json.",
)
@click.option(
    "--sku",
    default="a100-80gb",
    show_default=True,
    help="GPU SKU id (see `llmcap catalog skus`), e.g. a100-80gb, h100-sxm, h200, l40s.",
)
@click.option(
    "--catalog",
    "catalog_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Extra SKU catalog YAML (adds SKUs or overrides prices); repeatable.",
)
@click.option(
    "--tp",
    type=int,
    default=1,
    show_default=True,
    help="Tensor-parallel degree: GPUs that split every layer (inside one node).",
)
@click.option(
    "--ep",
    type=int,
    default=1,
    show_default=True,
    help="Expert-parallel degree of a mixture-of-experts model: the DP x TP GPUs hold "
    "experts/EP experts each (EP divides the experts and DP x TP).",
)
@click.option(
    "--dp",
    type=int,
    default=1,
    show_default=True,
    help="Attention data-parallel degree of a mixture-of-experts model: DP attention groups of "
    "TP GPUs per replica, each with its own requests and KV cache, sharing the experts "
    "(DP x TP x PP GPUs per replica; batch cap and token budget split over the DP ranks).",
)
@click.option(
    "--pp",
    type=int,
    default=1,
    show_default=True,
    help="Pipeline-parallel degree: stages that split the layers.",
)
@click.option(
    "--replicas",
    type=int,
    default=1,
    show_default=True,
    help="Independent replicas, each with TP x PP GPUs.",
)
@click.option(
    "--engine",
    default="vllm",
    show_default=True,
    metavar="NAME[@VERSION]",
    help="Serving engine whose profile runs the deployment: vllm, sglang, trtllm, or vidur "
    "(Vidur's 2024 vLLM); e.g. vllm@0.12.0.  It sets the defaults of --scheduler, its limits, "
    "--gpu-memory-utilization and --kv-precision, and the per-iteration overhead; a VERSION "
    "also picks the measured tables --estimator profiled/auto reads (the nearest release).",
)
@click.option(
    "--scheduler",
    type=_choice(["vllm", "orca", "sarathi", "sglang", "static"]),
    default=None,
    help="Replica batching policy: vllm (prefill-first), orca (iteration-level), "
    "sarathi (chunked prefill), sglang (chunked prefill and decode in separate iterations), "
    "static (FasterTransformer-style) [the engine's].",
)
@click.option(
    "--batch-size",
    type=int,
    default=None,
    help="Most sequences in one batch (per micro-batch under PP) [the engine's: max_num_seqs, "
    "max_running_requests, max_batch_size; vidur 128].",
)
@click.option(
    "--chunk-size",
    type=int,
    default=None,
    help="Token budget per iteration of sarathi (prefill chunk + decodes) and sglang (prefill "
    "chunk) [the engine's token budget; vidur 512].",
)
@click.option(
    "--max-tokens",
    type=int,
    default=None,
    help="Most tokens per iteration for vllm and orca [the engine's token budget; vidur: "
    "vllm 4096, orca/static no limit].",
)
@click.option(
    "--batch-wait-iters",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Batch waiting (TensorRT-LLM's batch_wait_timeout_iters): while decodes run, hold "
    "new prompts back up to this many iterations so that prefills batch up (0: off).",
)
@click.option(
    "--batch-wait-token-ratio",
    type=click.FloatRange(0.0, 1.0),
    default=0.0,
    show_default=True,
    help="Batch waiting (TensorRT-LLM's batch_wait_max_tokens_ratio): stop holding once the "
    "held prompts and the decodes reach this share of the token budget.",
)
@click.option(
    "--adp-balance-timeout-iters",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Attention-DP balance (TensorRT-LLM's attention_dp_config timeout_iters, with "
    "enable_balance): under --dp > 1, hold new prompts back until every DP rank has one, "
    "at most until this many iterations have been counted (0 with no batching wait: off).",
)
@click.option(
    "--adp-balance-batching-wait-iters",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Attention-DP balance (TensorRT-LLM's attention_dp_config batching_wait_iters): "
    "once every DP rank has a prompt and all decode, hold them this many iterations more.",
)
@click.option(
    "--recv-interval",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Decode iterations between the scheduler's polls for new requests (SGLang's "
    "--scheduler-recv-interval): a request arriving while batches run waits for the next "
    "poll, after a prefill or every N decode iterations (1: every iteration).",
)
@click.option(
    "--global-scheduler",
    type=_choice(["round_robin", "lor", "random", "cache_aware"]),
    default="round_robin",
    show_default=True,
    help="Routing of requests to replicas (lor: least outstanding requests; cache_aware: the "
    "replica caching the request's prefix, as vLLM's router and SGLang's gateway route).",
)
@click.option(
    "--precision",
    type=_choice(["bf16", "fp16", "fp8", "fp4"]),
    default=None,
    help="Weight (and compute) precision; fp4 is NVFP4 on GPUs with FP4 tensor cores "
    "(Blackwell) [the checkpoint's own, as the engines load it: fp8 where its config.json "
    "quantises the weights (DeepSeek-V3, MiniMax-M2.5), else bf16].",
)
@click.option(
    "--expert-precision",
    type=_choice(["bf16", "fp16", "fp8", "fp4", "mxfp4", "int4"]),
    default=None,
    help="Routed-expert weight precision of a mixture of experts, apart from --precision "
    "(mxfp4: 4-bit weights with an E8M0 scale per 32, gpt-oss's checkpoint; W4A8 on "
    "Blackwell, weight-only with 16-bit math elsewhere; int4: 4-bit integers with a 16-bit "
    "scale per group, Kimi-K2.5's checkpoint, weight-only everywhere; fp4: NVFP4, "
    "Blackwell only) [the checkpoint's own: mxfp4 for gpt-oss, int4 for Kimi-K2.5, else "
    "--precision].",
)
@click.option(
    "--kv-precision",
    type=_choice(["bf16", "fp16", "fp8"]),
    default=None,
    help="KV-cache precision [the weights'; under fp8 weights the engine's default].",
)
@click.option(
    "--block-size", type=int, default=16, show_default=True, help="Tokens per paged KV-cache block."
)
@click.option(
    "--gpu-memory-utilization",
    type=float,
    default=None,
    help="Memory fraction of the engine's plan (vLLM gpu_memory_utilization, SGLang "
    "mem_fraction_static, TensorRT-LLM free_gpu_memory_fraction) [the engine's default].",
)
@click.option(
    "--prefix-cache/--no-prefix-cache",
    default=True,
    show_default=True,
    help="Reuse the KV of cached prompt prefixes, as the engines do by default; used when the "
    "workload carries prefix hashes (a Mooncake trace's hash_ids).",
)
@click.option(
    "--prefix-cache-tokens",
    default=None,
    metavar="N|unbounded",
    help="Prefix-cache size per replica in tokens, least recently used blocks evicted "
    "[the replica's KV-cache size].",
)
@click.option(
    "--decode-replicas",
    type=int,
    default=None,
    help="Disaggregated serving: replicas of a decode pool (--sku/--tp/--replicas are then "
    "the prefill pool); a decode replica reserves a prompt's KV blocks before its transfer "
    "starts and queues transfers it has no room for [aggregated].",
)
@click.option("--decode-sku", default=None, help="GPU of the decode pool [--sku].")
@click.option("--decode-tp", type=int, default=None, help="TP of the decode pool [1].")
@click.option(
    "--decode-batch-size", type=int, default=None, help="Batch cap of the decode pool [engine's]."
)
@click.option("--decode-dp", type=int, default=None,
              help="Attention data parallelism of a decode replica (MoE) [1].")  # fmt: skip
@click.option("--decode-ep", type=int, default=None,
              help="Expert parallelism of a decode replica (MoE) [1].")  # fmt: skip
@click.option(
    "--decode-link",
    type=_choice(["auto", "nvlink", "network"]),
    default=None,
    help="Link the KV cache crosses to the decode pool: nvlink (one node of one SKU), network, "
    "auto (nvlink where the pools fit one node) [auto].",
)
@click.option(
    "--decode-router",
    type=_choice(["lor", "round_robin", "random"]),  # simulator.DECODE_ROUTERS
    default=None,
    help="Which decode replica takes each request: lor (the fewest outstanding requests), "
    "round_robin (each in turn whatever its load, as NVIDIA Dynamo's frontend routes by "
    "default: a request can wait behind a busy replica while another idles) or random [lor].",
)
@click.option(
    "--decode-gpu-memory-utilization",
    type=float,
    default=None,
    help="Memory fraction of the decode pool's servers, where they are launched with their "
    "own [--gpu-memory-utilization].",
)
@click.option(
    "--speculative",
    "speculative_method",
    type=_choice(["mtp", "eagle", "draft"]),
    default=None,
    help="Speculative decoding: mtp or eagle (draft layers of the model's shape), or draft "
    "(--draft-model); the drafter also runs over every prompt chunk [off].",
)
@click.option("--draft-model", default=None, help="The draft model of --speculative draft.")
@click.option(
    "--num-speculative-tokens",
    type=int,
    default=None,
    help="Tokens proposed per step (k); each running decode's verify step counts k + 1 "
    "tokens against the iteration's token budget [1].",
)
@click.option(
    "--acceptance-rate",
    type=float,
    default=None,
    help="Probability a proposed token is accepted given the ones before it [0.7].",
)
@click.option(
    "--acceptance-rates",
    default=None,
    help="Acceptance per proposed position, comma-separated (k values), instead of "
    "--acceptance-rate.",
)
@click.option(
    "--tbt-gaps",
    type=_choice(["chunk", "token"]),
    default=None,
    help="TBT of a speculative step's burst of tokens: chunk (one gap per step, as vllm bench "
    "serve counts ITL) or token (the step's gap, then 0 within the burst) [chunk].",
)
@click.option(
    "--estimator",
    type=_choice(["roofline", "profiled", "auto"]),
    default="roofline",
    show_default=True,
    help="Cost model that times each iteration: roofline; profiled (measured operator tables "
    "of the llmcap[aic] extra, or --op-tables; exit 2 without data); auto (profiled where the "
    "tables cover the GPU, precision and engine, else roofline with a warning; MoE and MLA "
    "models: roofline, with the engine's measured experts for eagerly run iterations).",
)
@click.option(
    "--op-tables",
    type=click.Path(path_type=Path),
    default=None,
    metavar="DIR",
    help="Operator tables written by `llmcap profile run` or `llmcap profile import-vidur`, "
    "or the name of shipped ones (`llmcap catalog op-tables`), read by --estimator "
    "profiled/auto instead of aiconfigurator-core's.",
)
@click.option(
    "--workload",
    default="chat",
    show_default=True,
    help="Built-in workload name or a trace file path (see below).",
)
@click.option(
    "--trace-format",
    type=_choice(["auto", "azure", "vidur", "mooncake", "csv"]),
    default="auto",
    show_default=True,
    help="Format of a trace file.",
)
@click.option(
    "--arrival",
    type=_choice(["poisson", "gamma", "static", "trace"]),
    default=None,
    help="Arrival process [trace timestamps when the trace has them and no --qps; else poisson].",
)
@click.option(
    "--cv",
    type=float,
    default=1.0,
    show_default=True,
    help="Burstiness of gamma arrivals: coefficient of variation (1 = Poisson).",
)
@click.option(
    "--prompt-len",
    default=None,
    help=f"Override prompt lengths with a length spec: {LENGTH_SPEC_FORMS}.",
)
@click.option(
    "--output-len", default=None, help="Override output lengths with a length spec (as above)."
)
@click.option(
    "--max-total-tokens",
    type=int,
    default=None,
    help="Drop requests whose prompt + output exceed this.",
)
@click.option(
    "--qps",
    type=float,
    default=None,
    help="Arrival rate (requests/s); rescales a trace's own timestamps.",
)
@click.option(
    "--concurrency",
    type=int,
    default=None,
    help="Closed loop: keep this many requests in flight (like a benchmark client).",
)
@click.option(
    "--num-requests", type=int, default=1000, show_default=True, help="Requests to simulate."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every random draw.")
@click.option("--json", "json_output", is_flag=True, help="Print the summary as JSON.")
@click.option(
    "--requests-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write per-request records (.csv, or .parquet).",
)
@click.option(
    "--trace-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write a Chrome/Perfetto trace of every batch on every replica stage (.json).",
)
@click.pass_context
@user_errors
def simulate(ctx: click.Context, config_file: Path | None, **options: Any) -> None:
    """Simulate one deployment serving one workload and print its metrics.

    The deployment is a model on a GPU SKU with tensor (--tp) and pipeline (--pp)
    parallelism, --replicas copies, and a batching --scheduler.  The workload is a
    built-in request mix, a trace replay or a synthetic stream at --qps (open loop)
    or --concurrency (closed loop).  Latencies: TTFT (time to first token), TBT
    (time between tokens), TPOT (time per output token), E2E, and scheduling delay
    (arrival to first admission).
    """
    from search._simulate_cmd import run_simulate

    run_simulate(_merge_config(ctx, config_file, options))


def _merge_config(ctx: click.Context, config_file: Path | None, options: dict) -> dict:
    """Config-file values, overridden by options given on the command line."""
    from search._errors import SpecError
    from search._simulate_spec import read_config_file

    merged: dict[str, Any] = read_config_file(config_file) if config_file else {}
    workload = merged.pop("workload", None)
    if isinstance(workload, str):
        workload = {"source": workload}
    elif workload is None or isinstance(workload, dict):
        workload = dict(workload or {})
    else:
        raise SpecError(
            "config file: workload: expected a trace file or built-in workload name, or a "
            f"mapping of workload fields (source, prompt_len, ...); got {workload!r}"
        )
    workload_keys = {
        "workload": "source", "trace_format": "trace_format", "arrival": "arrival", "cv": "cv",
        "prompt_len": "prompt_len", "output_len": "output_len",
        "max_total_tokens": "max_total_tokens",
    }  # fmt: skip
    for name, value in options.items():
        explicit = ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE
        if name in workload_keys:
            key = workload_keys[name]
            if explicit or (key not in workload and value is not None):
                workload[key] = value
            continue
        key = "json" if name == "json_output" else name
        key = "catalog" if name == "catalog_files" else key
        if explicit or key not in merged:
            merged[key] = list(value) if isinstance(value, tuple) else value
    merged["workload"] = workload
    _nest(merged, "speculative", {
        "speculative_method": "method", "draft_model": "draft_model",
        "num_speculative_tokens": "num_speculative_tokens", "acceptance_rate": "acceptance_rate",
        "acceptance_rates": "acceptance_rates", "tbt_gaps": "tbt_gaps",
    })  # fmt: skip
    _nest(merged, "decode", {
        "decode_replicas": "replicas", "decode_sku": "sku", "decode_tp": "tp",
        "decode_batch_size": "batch_size", "decode_link": "link", "decode_dp": "dp",
        "decode_ep": "ep", "decode_router": "router",
        "decode_gpu_memory_utilization": "gpu_memory_utilization",
    })  # fmt: skip
    return merged


def _nest(merged: dict, section: str, names: dict[str, str]) -> None:
    """Move the flat options `names` (option name -> field) that were given into the
    `section` mapping of `merged`, over what a config file put there."""
    from search._errors import SpecError

    given = {field: merged.pop(name) for name, field in names.items() if name in merged}
    given = {field: value for field, value in given.items() if value is not None}
    if given:
        own = merged.get(section) or {}
        if not isinstance(own, dict):
            raise SpecError(f"config file: {section}: expected a mapping of fields; got {own!r}")
        merged[section] = {**own, **given}


def main() -> None:
    cli(prog_name="llmcap")
