"""`llmcap profile`: measure operator tables (torch) or import Vidur's, for --op-tables."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from search._cli_common import user_errors
from search._progress import DEFAULT_EVERY_S, eta_seconds, format_duration

PROFILE_EPILOG = """
\b
Examples:
  llmcap profile run --model meta-llama/Llama-3.1-8B --tp 1,2,4,8 --out tables/h100-llama8b
  llmcap profile run --model path/to/config.json --tp 1 --dtype fp8 --out tables/fp8
  llmcap profile run --model tiny/config.json --tp 1 --device cpu --quick --out /tmp/t
  llmcap profile import-vidur path/to/vidur --gpu a100 --out tables/vidur-a100
  llmcap simulate --sku h100-sxm --model meta-llama/Llama-3.1-8B --estimator profiled \\
      --op-tables tables/h100-llama8b

\b
The tables (meta.yaml, gemm.csv, context_attention.csv, generation_attention.csv,
allreduce.csv, moe.csv; columns and units in estimators/_op_tables.py) are what
`--estimator profiled --op-tables DIR` reads instead of aiconfigurator-core's.
"""

RUN_EPILOG = """
\b
Examples:
  llmcap profile run --model meta-llama/Llama-3.1-8B --tp 1,2,4,8 --out tables/h100-llama8b
  llmcap profile run --model meta-llama/Llama-3.1-70B --tp 4,8 --dtype bf16,fp8 --out t/70b
  llmcap profile run --model path/to/config.json --tp 1,2 --device cpu --quick --out /tmp/t
  llmcap profile run --model Qwen/Qwen3-235B-A22B --tp 4,8 --dtype bf16,fp8 --out t/qwen235

\b
What is timed, for each TP degree that divides the heads:
  GEMMs      QKV, O, gate-up, down and the LM head at their TP-sharded shapes, over token
             counts m = 1..16384 (--quick: 1, 8, 64); --dtype fp8 times the layer GEMMs in
             fp8 (torch._scaled_mm; compute capability 8.9+), the LM head stays bf16
  prefill    causal attention (torch SDPA: flash where available) over batch x prompt length,
             plus a few chunks after a cached prefix
  decode     one token per sequence over batch x KV length, dense KV cache (no paged gather)
  all-reduce NCCL over 2..N GPUs when several are visible; skipped on CPU or one GPU
  experts    a mixture of experts' routed experts on one GPU, as MoE TP N and as EP N
             (torch grouped GEMMs, balanced routing), over 1..16384 tokens entering the
             layer; torch's unfused kernels run 1.2-1.8x the engines' fused ones (up
             to 3x), benchmarks/compare_op_tables.py: an upper bound on the experts
Multi-head latent attention (DeepSeek-V3) and its projections are not timed.
Timing: CUDA events on a GPU, perf_counter on the CPU; warm-up runs, then the median of
the repeats; random inputs.  The meta records the GPU, driver, CUDA, torch and date; the
catalog SKU comes from the GPU name, or --sku.  A CPU run is slow: use --quick.
Needs torch: pip install 'llmcap[profile]'.
"""

IMPORT_EPILOG = """
\b
Examples:
  llmcap profile import-vidur ~/src/vidur/data --gpu h100 --out tables/vidur-h100
  llmcap simulate --sku h100-sxm --model meta-llama/Llama-2-70b-hf --tp 4 \\
      --estimator profiled --op-tables tables/vidur-h100

\b
VIDUR_DIR holds Vidur's profiling/ (and profiling_2024/) folders as in microsoft/vidur's
data/ directory: per-operator times of each model and TP degree (GEMM rows at the model's
shapes), attention (A100 only in the public release) and all-reduce.  Vidur does not time
the LM head, and records no dtype or versions (the tables say fp16 and leave them empty).
"""


out_option = click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory to write the tables to (created; files in it are replaced).",
)


@click.group("profile", epilog=PROFILE_EPILOG)
def profile_group() -> None:
    """Measure operator times on this machine, or import Vidur's, as op tables."""


def _tp_list(_ctx: click.Context, _param: click.Parameter, value: str) -> list[int]:
    try:
        tps = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(
            f"{value!r}: a comma-separated list of integers, e.g. 1,2,4,8"
        ) from None
    if not tps or any(tp < 1 for tp in tps):
        raise click.BadParameter(f"{value!r}: positive integers, e.g. 1,2,4,8")
    return sorted(set(tps))


def _dtype_list(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[str, ...]:
    dtypes = tuple(dict.fromkeys(v.strip().lower() for v in value.split(",") if v.strip()))
    bad = [d for d in dtypes if d not in ("bf16", "fp8")]
    if bad or not dtypes:
        raise click.BadParameter(f"{value!r}: bf16, fp8, or both as bf16,fp8")
    return dtypes


@profile_group.command("run", epilog=RUN_EPILOG)
@click.option(
    "--model",
    required=True,
    help="Built-in model name (see `llmcap catalog models`) or path to a HF config.json.",
)
@click.option(
    "--tp",
    "tps",
    default="1",
    show_default=True,
    callback=_tp_list,
    metavar="LIST",
    help="Tensor-parallel degrees whose sharded shapes are timed, e.g. 1,2,4,8.",
)
@click.option(
    "--dtype",
    "dtypes",
    default="bf16",
    show_default=True,
    callback=_dtype_list,
    metavar="LIST",
    help="Precisions of the layer GEMMs: bf16, fp8 or bf16,fp8 (attention and the LM head "
    "are timed in bf16, once).",
)
@click.option(
    "--device",
    type=click.Choice(["cuda", "cpu"], case_sensitive=False),
    default=None,
    help="Where to run [cuda when torch sees a GPU, else cpu].",
)
@click.option("--quick", is_flag=True, help="A tiny grid and few repeats: seconds, even on CPU.")
@click.option(
    "--sku",
    default=None,
    help="Catalog SKU id the tables stand for [from the GPU name; none on CPU].",
)
@click.option("--warmup", type=click.IntRange(min=0), default=None, help="Warm-up runs [5; 1].")
@click.option(
    "--repeats", type=click.IntRange(min=1), default=None, help="Timed runs per point [20; 3]."
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    help="torch threads of a CPU run [torch's default].",
)
@out_option
@user_errors
def profile_run(
    model: str,
    tps: list[int],
    dtypes: tuple[str, ...],
    device: str | None,
    quick: bool,
    sku: str | None,
    warmup: int | None,
    repeats: int | None,
    threads: int | None,
    out: Path,
) -> None:
    """Time a model's operators with torch on this machine and write op tables.

    The tables feed `llmcap simulate --estimator profiled --op-tables DIR` (and `auto`).
    """
    from estimators import load_model
    from estimators.profiler import ProfileSettings, run_profile
    from sku_catalog import load_catalog

    if sku is not None:
        load_catalog().get(sku)  # an unknown id fails here, naming the ones there are
    settings = ProfileSettings(
        load_model(model),
        model,
        tps,
        dtypes=dtypes,
        device=device.lower() if device else None,
        quick=quick,
        sku=sku,
        warmup=warmup,
        repeats=repeats,
        cpu_threads=threads,
    )
    err = Console(stderr=True)
    with _progress(err) as on_step:
        result = run_profile(settings, out, on_step)
    info = result.device
    where = f"{info.name} ({info.device}" + (f", CUDA {info.cuda}" if info.cuda else "") + ")"
    err.print(f"profiled {settings.model.name} on {where}, torch {info.torch}")
    for note in result.notes:
        err.print(f"  note: {note}")
    if result.sku is None:
        err.print("  the tables name no catalog SKU (pass --sku to name one)")
    _print_written(result.files, result.rows)


def _print_written(files: list[Path], rows: dict[str, int]) -> None:
    for path in files:
        n = f": {rows[path.stem]} rows" if path.stem in rows else ""
        click.echo(f"wrote {path}{n}")


@contextmanager
def _progress(console: Console) -> Iterator[Callable[[int, int, str], None]]:
    """Progress of the measurements: a transient bar on a terminal, else a plain line at
    most every LLMCAP_PROGRESS_EVERY seconds (a GPU job's log is never silent for long)."""
    if console.is_terminal:
        columns = (
            TextColumn("profiling {task.description:<22}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=console, transient=True) as progress:
            task = progress.add_task("", total=None)

            def update(done: int, total: int, label: str) -> None:
                progress.update(task, completed=done, total=total, description=label)

            yield update
        return
    every = float(os.environ.get("LLMCAP_PROGRESS_EVERY", DEFAULT_EVERY_S))
    started = time.monotonic()
    last = [started]

    def line(done: int, total: int, label: str) -> None:
        now = time.monotonic()
        if now - last[0] < every and done < total:
            return
        last[0] = now
        eta = eta_seconds(now - started, done, total)
        console.print(
            f"profiling: {done}/{total} measurements ({label}), elapsed "
            f"{format_duration(now - started)}, ETA {format_duration(eta)}",
            soft_wrap=True,
        )

    yield line


@profile_group.command("import-vidur", epilog=IMPORT_EPILOG)
@click.argument("vidur_dir", type=click.Path(path_type=Path))
@click.option(
    "--gpu",
    required=True,
    type=click.Choice(["a100", "h100", "a40"], case_sensitive=False),
    help="Which of Vidur's GPUs to convert.",
)
@out_option
@user_errors
def profile_import_vidur(vidur_dir: Path, gpu: str, out: Path) -> None:
    """Convert Vidur's public profiling CSVs of one GPU into op tables."""
    from estimators.profiler import import_vidur

    result = import_vidur(vidur_dir, gpu.lower(), out)
    err = Console(stderr=True)
    err.print(f"imported {len(result.models)} models' operator tables: {', '.join(result.models)}")
    for note in result.skipped:
        err.print(f"  note: {note}")
    _print_written(result.files, result.rows)
