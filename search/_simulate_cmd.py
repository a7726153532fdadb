"""`llmcap simulate`: validate the input, run the simulation, report."""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from estimators import EstimatorFallbackWarning, MemoryPlan, variant_note
from search._errors import SpecError, format_validation_error
from search._outputs import check_output_file, writing
from search._report import estimator_label, overload_warning, print_summary
from search._simulate_spec import SimulateSpec
from simulator import RunOptions, prepare
from workloads import build_workload, describe_workload

REQUESTS_FORMATS = (".csv", ".parquet")
TRACE_FORMATS = (".json",)


def run_simulate(data: dict[str, Any]) -> None:
    try:
        spec = SimulateSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, "input", SimulateSpec)) from None
    note = variant_note(spec.model)
    if note and not spec.json_output:
        click.echo(f"note: {note}", err=True)
    if spec.requests_out is not None:
        check_output_file(spec.requests_out, "--requests-out", REQUESTS_FORMATS)
    if spec.trace_out is not None:
        check_output_file(spec.trace_out, "--trace-out", TRACE_FORMATS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", EstimatorFallbackWarning)
        prepared = prepare(spec.deployment())
    for w in caught:
        if issubclass(w.category, EstimatorFallbackWarning):
            click.echo(f"warning: {w.message}", err=True)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    workload = build_workload(
        spec.workload,
        num_requests=spec.num_requests,
        qps=spec.qps,
        concurrency=spec.concurrency,
        seed=spec.seed,
    )
    with simulation_progress(len(workload), enabled=not spec.json_output) as on_progress:
        options = RunOptions(
            seed=spec.seed,
            record_stage_times=spec.trace_out is not None,
            on_progress=on_progress,
        )
        result = prepared.simulate(workload, options)
    info = workload_info(workload, spec)
    if spec.json_output:
        memory = prepared.memory
        deployment = prepared.deployment
        payload = {
            "deployment": {
                **spec.model_dump(
                    mode="json", exclude={"json_output", "requests_out", "trace_out"}
                ),
                # what the model name and the engine's profile resolved to
                "model_architecture": deployment.model.name,
                "precision": deployment.precision.value,
                "engine": deployment.engine_key,
                "scheduler": deployment.scheduler.kind.value,
                "batch_size": deployment.scheduler.batch_size,
                "chunk_size": deployment.scheduler.chunk_size,
                "max_tokens": deployment.scheduler.max_tokens,
                "kv_precision": memory.kv_precision.value,
                "weight_layout": memory.weight_layout,
                "gpu_memory_utilization": memory.gpu_memory_utilization,
            },
            "engine": {
                "name": deployment.engine_key,
                "memory_fraction_name": memory.memory_fraction_name,
                "memory_fraction": memory.gpu_memory_utilization,
                "memory_fraction_of": memory.memory_fraction_of,
            },
            "memory": {
                **_memory_per_gpu(memory),
                "window_kv_blocks_per_request": memory.window_kv_blocks,
                **(
                    {"drafter": memory.drafter.label,
                     "drafter_weights_bytes_per_gpu": memory.drafter.weights_bytes,
                     "drafter_kv_bytes_per_token_per_gpu": memory.drafter.kv_bytes_per_token}
                    if memory.drafter is not None
                    else {}
                ),
            },
            **({"decode_memory": {
                "memory_fraction": prepared.decode_memory.gpu_memory_utilization,
                **_memory_per_gpu(prepared.decode_memory),
            }} if prepared.decode_memory is not None else {}),
            "estimator": {
                "requested": spec.estimator,
                "used": getattr(prepared.estimator, "backend_name", spec.estimator),
                "label": estimator_label(prepared),
                "note": getattr(prepared.estimator, "selection_note", ""),
                "fallbacks": getattr(prepared.estimator, "fallbacks", {}),
            },
            "workload": info,
            "warnings": [w for w in (overload_warning(result.summary, info),) if w],
            **result.summary,
        }
        click.echo(json.dumps(payload, indent=2))
    else:
        print_summary(result.summary, prepared, info)
    if spec.requests_out is not None:
        with writing(spec.requests_out, "--requests-out"):
            path = result.write_requests(spec.requests_out)
        click.echo(f"wrote per-request records to {path}", err=True)
    if spec.trace_out is not None:
        with writing(spec.trace_out, "--trace-out"):
            path = result.write_chrome_trace(spec.trace_out)
        click.echo(f"wrote Chrome trace to {path} (open in ui.perfetto.dev)", err=True)
    sys.stdout.flush()


def _memory_per_gpu(memory: MemoryPlan) -> dict[str, Any]:
    """A pool's memory plan, per GPU, as the JSON output reports it."""
    return {
        "weights_bytes_per_gpu": memory.weights_bytes,
        "kv_cache_bytes_per_gpu": memory.kv_bytes,
        "kv_capacity_tokens": memory.kv_capacity_tokens,
        "num_kv_blocks": memory.num_kv_blocks,
    }


@contextmanager
def simulation_progress(total: int, enabled: bool) -> Iterator[Callable[[Any], None] | None]:
    """A transient progress bar of finished requests, on a terminal only."""
    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield None
        return
    columns = (
        TextColumn("simulating"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("requests"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("simulate", total=total)

        def update(sim: Any) -> None:
            progress.update(task, completed=sim.completed)

        yield update


def workload_info(workload, spec: SimulateSpec) -> dict[str, Any]:
    described = describe_workload(workload)
    kind = workload.metadata.get("arrival", "")
    if workload.concurrency is not None:
        arrivals = f"closed loop, concurrency {workload.concurrency}"
    elif kind == "trace":
        rate = described.get("mean_qps")
        at = f"{rate:.2f} req/s" if rate else "as recorded"
        arrivals = f"trace timestamps ({at})"
    elif spec.qps is not None:
        arrivals = f"{kind} at {spec.qps:g} req/s"
    else:
        arrivals = str(kind)
    return {
        "name": workload.name,
        "num_requests": len(workload),
        "arrivals": arrivals,
        "prompt_mean": float(workload.prompt_tokens.mean()),
        "output_mean": float(workload.output_tokens.mean()),
        "described": described,
    }
