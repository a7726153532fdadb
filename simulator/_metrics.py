"""Metrics of a finished simulation (DESIGN.md, "Domain rules").

Everything here runs once, after the event loop, on numpy arrays: per-token
times are rebuilt from the lanes' step times and each request's decode
segments, so the loop itself never touches a token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from simulator._engine import Simulation
from simulator._lane import BurstLane

PERCENTILES = (50, 90, 95, 99)


def weighted_percentiles(
    values: np.ndarray, weights: np.ndarray | None, percentiles: tuple[int, ...] = PERCENTILES
) -> dict[str, float]:
    """P50/P90/P95/P99 and mean of `values`, each counted `weights` times.

    A percentile is the smallest value whose cumulative weight reaches that share
    of the total (the inverted-CDF definition), so it is always an observed value.
    """
    out: dict[str, float] = {}
    if weights is None:
        weights = np.ones(len(values), dtype=np.int64)
    keep = weights > 0
    values = values[keep]
    weights = weights[keep]
    total = float(weights.sum()) if len(weights) else 0.0
    if total == 0:
        for p in percentiles:
            out[f"p{p}"] = math.nan
        out["mean"] = math.nan
        return out
    # with integer weights any order of equal values gives the same percentiles (the same
    # value, and the same cumulative weights, exact in float64, around them): the unstable
    # sort, several times faster, will do
    order = np.argsort(values, kind="quicksort" if weights.dtype.kind in "iub" else "stable")
    sorted_values = values[order]
    cumulative = np.cumsum(weights[order], dtype=np.float64)
    for p in percentiles:
        idx = int(np.searchsorted(cumulative, p / 100.0 * total - 1e-9, side="left"))
        out[f"p{p}"] = float(sorted_values[min(idx, len(sorted_values) - 1)])
    out["mean"] = float(np.dot(values, weights) / total)
    return out


@dataclass(slots=True)
class TokenGaps:
    """Every time-between-tokens of the run, as values with multiplicities."""

    values: np.ndarray
    weights: np.ndarray


def token_gaps(sim: Simulation) -> TokenGaps:
    """Rebuild every TBT from lane step times and request segments."""
    lanes = sim.lanes
    lengths = np.array([len(lane.step_end_times) for lane in lanes], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    step_times = np.fromiter(
        (t for lane in lanes for t in lane.step_end_times),
        dtype=np.float64,
        count=int(lengths.sum()),
    )
    seg_emit: list[float] = []
    seg_lane: list[int] = []
    seg_first: list[int] = []
    seg_end: list[int] = []
    resume_gaps: list[float] = []
    for req in sim.requests:
        segments = req.segments
        if not segments:
            continue
        for emit, lane, j, k in segments:
            seg_emit.append(emit)
            seg_lane.append(lane)
            seg_first.append(j)
            seg_end.append(k)
        if len(segments) > 1:  # preempted: the gap from its last token to the recomputed one
            for (emit_a, lane_a, j_a, k_a), (emit_b, _, _, _) in pairwise(segments):
                last = step_times[offsets[lane_a] + k_a - 1] if k_a > j_a else emit_a
                resume_gaps.append(emit_b - last)
    emit = np.asarray(seg_emit, dtype=np.float64)
    base = offsets[np.asarray(seg_lane, dtype=np.int64)] if seg_lane else np.zeros(0, np.int64)
    first = base + np.asarray(seg_first, dtype=np.int64)
    end = base + np.asarray(seg_end, dtype=np.int64)
    has_decode = end > first
    first_gaps = step_times[first[has_decode]] - emit[has_decode]
    # interior gaps: step m of a lane follows step m-1; segment [j, k) covers m in (j, k)
    interior = np.zeros(len(step_times) + 1, dtype=np.int64)
    long_enough = end - first >= 2
    np.add.at(interior, first[long_enough] + 1, 1)
    np.add.at(interior, end[long_enough], -1)
    interior_weights = np.cumsum(interior)[: len(step_times)]
    step_gaps = np.diff(step_times, prepend=step_times[:1]) if len(step_times) else step_times
    values = np.concatenate((first_gaps, step_gaps, np.asarray(resume_gaps, dtype=np.float64)))
    weights = np.concatenate(
        (
            np.ones(len(first_gaps), dtype=np.int64),
            interior_weights,
            np.ones(len(resume_gaps), dtype=np.int64),
        )
    )
    # speculative bursts: each verify step's gap is counted once above (its first token);
    # timed per token, a burst's other tokens follow at no gap (`TBT_GAP_POLICIES`)
    within_bursts = sum(
        lane.extra_tokens
        for lane in lanes
        if isinstance(lane, BurstLane) and lane.accepted.config.tbt_gaps == "token"
    )
    if within_bursts:
        values = np.append(values, 0.0)
        weights = np.append(weights, within_bursts)
    return TokenGaps(values, weights)


def request_arrays(sim: Simulation) -> dict[str, np.ndarray]:
    """Per-request columns; times are NaN where the event did not happen."""
    reqs = sim.requests
    n = len(reqs)
    arrival = np.fromiter((r.arrival for r in reqs), np.float64, n)
    scheduled = np.fromiter((r.scheduled_at for r in reqs), np.float64, n)
    first_token = np.fromiter((r.first_token_at for r in reqs), np.float64, n)
    completed = np.fromiter((r.completed_at for r in reqs), np.float64, n)
    output = np.fromiter((r.output_tokens for r in reqs), np.int64, n)
    ttft = first_token - arrival
    e2e = completed - arrival
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(output > 1, (e2e - ttft) / np.maximum(output - 1, 1), np.nan)
    return {
        "request_id": np.arange(n),
        "replica": np.fromiter((r.replica for r in reqs), np.int64, n),
        "arrival": arrival,
        "prompt_tokens": np.fromiter((r.prompt_tokens for r in reqs), np.int64, n),
        "output_tokens": output,
        "scheduled": scheduled,
        "first_token": first_token,
        "completed": completed,
        "scheduling_delay": scheduled - arrival,
        "ttft": ttft,
        "tpot": tpot,
        "e2e": e2e,
        "normalized_latency": e2e / output,
        "preemptions": np.fromiter((r.preemptions for r in reqs), np.int64, n),
        "rejected": np.array([r.rejected or "" for r in reqs], dtype=object),
    }


def summarize(sim: Simulation) -> dict:
    """The summary of DESIGN.md: latency percentiles, throughput, replica utilisation."""
    cols = request_arrays(sim)
    done = ~np.isnan(cols["completed"])
    rejected = cols["rejected"] != ""
    end_time = sim.now
    # requests still waiting at the end count with the delay accrued so far
    waiting = ~rejected & np.isnan(cols["scheduled"]) & (cols["arrival"] <= end_time)
    delay = np.where(waiting, end_time - cols["arrival"], cols["scheduling_delay"])
    delay = delay[~np.isnan(delay)]
    gaps = token_gaps(sim)
    start_time = float(np.min(cols["arrival"])) if len(cols["arrival"]) else 0.0
    last_completion = float(np.max(cols["completed"][done])) if done.any() else start_time
    duration = max(last_completion - start_time, 1e-12)
    output_done = int(cols["output_tokens"][done].sum())
    prompt_done = int(cols["prompt_tokens"][done].sum())
    latency = {
        "ttft": weighted_percentiles(cols["ttft"][done], None),
        "tbt": weighted_percentiles(gaps.values, gaps.weights),
        "tpot": weighted_percentiles(cols["tpot"][done & ~np.isnan(cols["tpot"])], None),
        "e2e": weighted_percentiles(cols["e2e"][done], None),
        "normalized_latency": weighted_percentiles(cols["normalized_latency"][done], None),
        "scheduling_delay": weighted_percentiles(delay, None),
    }
    out = {
        "requests": {
            "total": len(sim.requests),
            "completed": int(done.sum()),
            "rejected": int(rejected.sum()),
            "unfinished": int((~done & ~rejected).sum()),
            "preemptions": int(cols["preemptions"].sum()),
        },
        "duration_s": duration,
        "throughput": {
            "requests_per_s": int(done.sum()) / duration,
            "output_tokens_per_s": output_done / duration,
            "total_tokens_per_s": (output_done + prompt_done) / duration,
        },
        "latency_s": latency,
        "queue": queue_trend(cols["arrival"], np.where(waiting, end_time - cols["arrival"],
                                                       cols["scheduling_delay"])),
        "replicas": replica_stats(sim, duration),
        "simulation": {
            "iterations": len(sim.batches),
            "wall_time_s": sim.wall_time,
        },
    }
    caches = [r.prefix_cache for r in sim.replicas if r.prefix_cache is not None]
    if caches:
        out["prefix_cache"] = prefix_cache_stats(caches)
    return out


def prefix_cache_stats(caches: list) -> dict[str, float | int | None]:
    """Hit rate and prefill tokens saved of the replicas' prefix caches (over every request
    that arrived; a request's hit is counted when it arrives), and their capacity in tokens
    (all replicas; None: unbounded)."""
    hit = sum(c.hit_tokens for c in caches)
    looked = sum(c.prompt_tokens for c in caches)
    bounded = all(c.capacity is not None for c in caches)
    return {
        "hit_rate": hit / looked if looked else 0.0,
        "prefill_tokens_saved": hit,
        "prompt_tokens": looked,
        "capacity_tokens": sum(c.capacity * c.block_tokens for c in caches) if bounded else None,
    }


def queue_trend(arrival: np.ndarray, delay: np.ndarray) -> dict[str, float]:
    """Mean scheduling delay of the first and the last quarter of the requests by arrival: a
    queue that grows the whole run (offered load above capacity) shows as a rising delay."""
    order = np.argsort(arrival, kind="stable")
    ranked = delay[order]
    quarter = max(len(ranked) // 4, 1)
    first, last = ranked[:quarter], ranked[-quarter:]
    first, last = first[~np.isnan(first)], last[~np.isnan(last)]
    return {
        "delay_first_quarter_s": float(first.mean()) if len(first) else math.nan,
        "delay_last_quarter_s": float(last.mean()) if len(last) else math.nan,
    }


def replica_roles(sim: Simulation) -> list[str]:
    """Each replica's role, by id: "aggregated" where the deployment has no decode pool, else
    "prefill" for its own replicas and "decode" for the decode pool's (numbered after them)."""
    n = len(sim.replicas)
    if sim.decode_pool is None:
        return ["aggregated"] * n
    decoders = sim.decode_pool.cluster.num_replicas
    return ["prefill"] * (n - decoders) + ["decode"] * decoders


def replica_stats(sim: Simulation, duration: float) -> list[dict]:
    b = sim.batches.columns()
    roles = replica_roles(sim)
    out = []
    for replica in sim.replicas:
        hw = replica.hardware
        total_blocks = replica.pool.total
        mine = b["replica"] == replica.id
        span = b["end"][mine] - b["start"][mine]
        seqs = b["num_prefills"][mine] + b["num_decodes"][mine]
        tokens = b["prefill_tokens"][mine] + b["num_decodes"][mine]
        kv = b["kv_blocks_used"][mine] / max(total_blocks, 1)
        gpu_seconds = duration * hw.gpus_per_replica
        flops = float(b["flops"][mine].sum())
        moved = float(b["bytes_moved"][mine].sum())
        out.append(
            {
                "replica": replica.id,
                "role": roles[replica.id],
                "batches": int(mine.sum()),
                "batch_size_mean": float(seqs.mean()) if len(seqs) else 0.0,
                "batch_size_max": int(seqs.max()) if len(seqs) else 0,
                "tokens_per_batch_mean": float(tokens.mean()) if len(tokens) else 0.0,
                "busy_s": replica.busy_time,
                "busy_fraction": min(replica.busy_time / duration, 1.0),
                "kv_utilization_mean": float(np.average(kv, weights=span))
                if span.sum() > 0
                else 0.0,
                "kv_utilization_peak": replica.pool.peak_used / max(total_blocks, 1),
                "preemptions": sum(r.preemptions for r in sim.requests if r.replica == replica.id),
                "mfu": flops / (gpu_seconds * hw.peak_flops) if hw.peak_flops else math.nan,
                "mbu": moved / (gpu_seconds * hw.memory_bandwidth)
                if hw.memory_bandwidth
                else math.nan,
            }
        )
    return out


def request_token_times(sim: Simulation, req_id: int) -> np.ndarray:
    """The emission time of every output token of one request, in order."""
    times: list[float] = []
    for emit, lane_id, first, end in sim.requests[req_id].segments:
        times.append(emit)
        lane = sim.lanes[lane_id]
        steps = lane.step_end_times[first:end]
        if isinstance(lane, BurstLane) and end > first:  # each step's time, once per token
            steps = np.repeat(steps, lane.bursts[(req_id, first)]).tolist()
        times.extend(steps)
    return np.asarray(times, dtype=np.float64)
