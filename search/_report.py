"""Terminal rendering of a simulation's summary."""

from __future__ import annotations

import math

from rich.console import Console, Group
from rich.table import Table

from simulator import PreparedDeployment

GIB = 1024**3

# (label, summary key, unit suffix: normalized latency is per output token)
LATENCY_ROWS = (
    ("TTFT", "ttft", ""),
    ("TBT", "tbt", ""),
    ("TPOT", "tpot", ""),
    ("E2E", "e2e", ""),
    ("Normalized", "normalized_latency", "/token"),
    ("Scheduling delay", "scheduling_delay", ""),
)
SECONDS_FROM = 10.0  # a row whose largest value reaches this many seconds reads in s, not ms
# an open-loop run that served less than this share of the offered rate fell behind
OVERLOAD_SHARE = 0.9
QUEUE_GROWTH_S = 1.0  # ... and whose queue grew by more than this


def _latency_cells(stats: dict) -> tuple[str, list[str]]:
    """(unit, P50 / P90 / P95 / P99 / mean in that unit): ms, or s for a row of long times."""
    values = [stats[k] for k in ("p50", "p90", "p95", "p99", "mean")]
    finite = [v for v in values if not math.isnan(v)]
    in_seconds = bool(finite) and max(finite) >= SECONDS_FROM
    scale, digits = (1.0, 2) if in_seconds else (1e3, 1)
    cells = ["-" if math.isnan(v) else f"{v * scale:,.{digits}f}" for v in values]
    return ("s" if in_seconds else "ms"), cells


def overload_warning(summary: dict, workload_info: dict) -> str | None:
    """A line when an open-loop run fell behind its offered rate: it served clearly less than
    offered and its queue grew the whole run (the scheduling delay of the last quarter of the
    requests is over a second and over twice that of the first), so its latencies describe a
    backlog, not a steady state."""
    offered = workload_info.get("described", {}).get("mean_qps")
    served = summary["throughput"]["requests_per_s"]
    if not offered or served >= OVERLOAD_SHARE * offered:
        return None
    first = summary["queue"]["delay_first_quarter_s"]
    last = summary["queue"]["delay_last_quarter_s"]
    if not last > max(QUEUE_GROWTH_S, 2.0 * first):
        return None
    return (
        f"overloaded: offered {offered:,.2f} req/s but served {served:,.2f} req/s; the queue "
        f"grew all run (scheduling delay {first:,.1f} s for the first quarter of the requests, "
        f"{last:,.1f} s for the last), so these latencies describe a backlog, not a steady "
        "state: lower --qps, or add replicas or GPUs"
    )


def render_summary(summary: dict, prepared: PreparedDeployment, workload_info: dict) -> Group:
    d = prepared.deployment
    mem = prepared.memory
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row(
        "Deployment",
        f"{d.model.name} on {d.num_replicas} x {d.sku.name} replica(s), "
        + (f"DP{d.dp} x " if d.dp > 1 else "")
        + f"TP{d.tp} PP{d.pp}"
        + (f" EP{d.ep}" if d.ep > 1 else "")
        + f", {d.precision.value}"
        + (f" ({mem.weight_layout})" if mem.weight_layout else "")
        + f", {d.scheduler.kind.value} (batch {d.scheduler.batch_size}"
        + (f", chunk {d.scheduler.chunk_size}" if d.scheduler.kind.chunked else "")
        + (f", max tokens {d.scheduler.max_tokens}" if d.scheduler.max_tokens else "")
        + ")",
    )
    if d.decode is not None and prepared.decode_pool is not None:
        pool, dm = d.decode, prepared.decode_memory
        head.add_row(
            "Decode pool",
            f"{pool.num_replicas} x {pool.sku.name} replica(s), TP{pool.tp}, "
            f"{pool.scheduler.kind.value} (batch {pool.scheduler.batch_size}); KV cache "
            f"{dm.kv_capacity_tokens:,} tokens / replica"
            + (f" ({dm.memory_fraction_name} {dm.gpu_memory_utilization:.3g})"
               if pool.gpu_memory_utilization is not None else "")
            + "; a prompt's KV reaches it "
            f"{prepared.decode_pool.transfer_seconds_per_token * 1e6:.2f} us per token "
            "after its prefill (the pool above prefills; TTFT is its first token)",
        )
    engine = d.engine
    head.add_row(
        "Engine",
        (engine.describe() if engine is not None else "vidur@2024 (Vidur's 2024 vLLM)")
        + f"; {mem.memory_fraction_name} {mem.gpu_memory_utilization:.3g}",
    )
    head.add_row(
        "Memory / GPU",
        f"weights {mem.weights_bytes / GIB:.1f} GiB, KV cache {mem.kv_bytes / GIB:.1f} GiB "
        f"({mem.kv_precision.value}) = {mem.kv_capacity_tokens:,} tokens "
        f"({mem.num_kv_blocks:,} blocks of {d.block_size})"
        + (f" per DP rank, {d.dp} ranks" if d.dp > 1 else "")
        + mem.drafter_note()
        + (
            f"; sliding-window layers hold {mem.window_kv_blocks} blocks per running request"
            if mem.window_kv_blocks
            else ""
        ),
    )
    head.add_row(
        "Workload",
        f"{workload_info['name']}: {workload_info['num_requests']:,} requests, "
        f"{workload_info['arrivals']}, prompt mean {workload_info['prompt_mean']:,.0f}, "
        f"output mean {workload_info['output_mean']:,.0f} tokens",
    )
    req = summary["requests"]
    tput = summary["throughput"]
    head.add_row(
        "Requests",
        f"{req['completed']:,} completed, {req['rejected']:,} rejected, "
        f"{req['preemptions']:,} preemptions, over {summary['duration_s']:,.1f} s",
    )
    head.add_row(
        "Throughput",
        f"{tput['requests_per_s']:,.2f} req/s, {tput['output_tokens_per_s']:,.0f} output tok/s, "
        f"{tput['total_tokens_per_s']:,.0f} total tok/s; ${d.cost_per_hour:,.2f}/h",
    )

    latency = Table(title="Latency", title_justify="left")
    latency.add_column("metric")
    latency.add_column("unit")
    for name in ("P50", "P90", "P95", "P99", "mean"):
        latency.add_column(name, justify="right")
    for label, key, per in LATENCY_ROWS:
        unit, cells = _latency_cells(summary["latency_s"][key])
        latency.add_row(label, unit + per, *cells)

    replicas = Table(title=f"Replicas (mean ≤ max{_pools(summary['replicas'])})",
                     title_justify="left")  # fmt: skip
    for name in ("#", "batches", "seqs/batch", "tokens/batch", "busy", "KV use", "MFU", "MBU"):
        replicas.add_column(name, justify="right")
    for r in summary["replicas"]:
        replicas.add_row(
            str(r["replica"]),
            f"{r['batches']:,}",
            f"{r['batch_size_mean']:.1f} ≤{r['batch_size_max']}",
            f"{r['tokens_per_batch_mean']:.0f}",
            f"{r['busy_fraction']:.0%}",
            f"{r['kv_utilization_mean']:.0%} ≤{r['kv_utilization_peak']:.0%}",
            f"{r['mfu']:.1%}",
            f"{r['mbu']:.1%}",
        )
    sim = summary["simulation"]
    footer = (
        f"[dim]simulated {sim['iterations']:,} iterations in {sim['wall_time_s']:.2f} s "
        f"(estimator: {estimator_label(prepared)})[/dim]"
    )
    warning = overload_warning(summary, workload_info)
    parts = [head, "", latency, "", replicas, footer]
    cache = summary.get("prefix_cache")
    if cache is not None:
        size = cache["capacity_tokens"]
        size_text = "unbounded" if size is None else f"{size:,} tokens in all"
        parts.insert(-1, (
            f"prefix cache: hit rate {cache['hit_rate']:.1%} of prompt tokens "
            f"({cache['prefill_tokens_saved']:,} not recomputed); {size_text}"
        ))
    if warning:
        parts[1:1] = ["", f"[bold yellow]warning[/bold yellow]: {warning}"]
    return Group(*parts)


def print_summary(summary: dict, prepared: PreparedDeployment, workload_info: dict) -> None:
    Console().print(render_summary(summary, prepared, workload_info))


def _pools(replicas: list[dict]) -> str:
    """The Replicas title's note of which replicas are each pool's, as "; prefill #0-1,
    decode #2-5" (their ids run in order, the prefill pool's first); "" where the
    deployment is aggregated."""
    ids: dict[str, list[int]] = {}
    for r in replicas:
        ids.setdefault(r["role"], []).append(r["replica"])
    if set(ids) == {"aggregated"}:
        return ""
    spans = [f"{role} #{i[0]}" + (f"-{i[-1]}" if len(i) > 1 else "") for role, i in ids.items()]
    return "; " + ", ".join(spans)


def estimator_label(prepared: PreparedDeployment) -> str:
    """Which cost model ran: its backend, and for `auto` which one it picked."""
    est = prepared.estimator
    used = getattr(est, "backend_name", prepared.deployment.estimator)
    asked = prepared.deployment.estimator
    label = used if asked == used else f"{asked} -> {used}"
    tables = getattr(est, "op_tables", None)
    if used == "profiled" and tables is not None:
        label += f", {tables.label}"
    return label
