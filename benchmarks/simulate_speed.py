"""Simulator speed benchmark (issue: "Simulator core", section Speed).

10,000 requests with the Azure LLM inference 2023 conversation trace's lengths,
Llama-2-7B on one A100-80GB, Sarathi-Serve (chunk 512, batch cap 128), Poisson
arrivals at about 80% of the configuration's capacity.  Target on the 2-core CI
machine: under 0.5 s wall (issue "Search speed"; 3 s before it) and under 500 MB peak
memory.

Capacity is found first (not timed) by bisection on the arrival rate with a
shorter run: the largest rate whose P99 scheduling delay stays under 5 s.

    python benchmarks/simulate_speed.py [--trace PATH] [--requests 10000] [--repeat 3]
    python benchmarks/simulate_speed.py --estimator profiled   # measured tables (llmcap[aic])

With ``--estimator profiled`` the target is 1.5 s (the tables are loaded and the
per-deployment curves built before the timed runs; that build is reported apart).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

from estimators import load_model
from simulator import Deployment, RunOptions, SchedulerConfig, SchedulerKind, prepare
from sku_catalog import load_catalog
from workloads import WorkloadSpec, build_workload

ROOT = Path(__file__).resolve().parents[1]

DEFAULT_TRACE = ROOT.parent / "shared" / "data" / "traces" / "azure_llm_2023_conv.csv"


def workload_at(source: str, n: int, qps: float, seed: int = 0):
    spec = WorkloadSpec(source=source, arrival="poisson")
    return build_workload(spec, num_requests=n, qps=qps, concurrency=None, seed=seed)


def p99_delay(prepared, source: str, n: int, qps: float) -> float:
    result = prepared.simulate(workload_at(source, n, qps))
    return result.summary["latency_s"]["scheduling_delay"]["p99"]


def find_capacity(prepared, source: str, n: int = 3000, slo: float = 5.0) -> float:
    lo, hi = 0.5, 1.0
    while p99_delay(prepared, source, n, hi) < slo:
        lo, hi = hi, hi * 2
    while hi / lo > 1.02:
        mid = (lo * hi) ** 0.5
        if p99_delay(prepared, source, n, mid) < slo:
            lo = mid
        else:
            hi = mid
    return lo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", default=str(DEFAULT_TRACE), help="Azure 2023 conversation CSV")
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--load", type=float, default=0.8, help="share of capacity")
    parser.add_argument("--qps", type=float, default=None, help="skip the capacity search")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--estimator", default="roofline", choices=["roofline", "profiled", "auto"])
    args = parser.parse_args()

    source = args.trace if Path(args.trace).exists() else "chat"
    if source == "chat":
        print(f"note: {args.trace} not found; using the built-in 'chat' workload", file=sys.stderr)
    deployment = Deployment(
        model=load_model("meta-llama/Llama-2-7b-hf"),
        sku=load_catalog().get("a100-80gb"),
        scheduler=SchedulerConfig(SchedulerKind.SARATHI, batch_size=128, chunk_size=512),
        estimator=args.estimator,
    )
    started = time.perf_counter()
    prepared = prepare(deployment)
    build_s = time.perf_counter() - started
    capacity = None
    qps = args.qps
    if qps is None:
        capacity = find_capacity(prepared, source)
        qps = args.load * capacity
    workload = workload_at(source, args.requests, qps)

    walls = []
    cpus = []  # CPU seconds of the process: less swayed than wall time by a shared machine
    loops = []  # each run's event loop alone (the rest of its wall time builds the metrics)
    result = None
    for _ in range(args.repeat):
        started, cpu = time.perf_counter(), time.process_time()
        result = prepared.simulate(workload, RunOptions())
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
        loops.append(result.summary["simulation"]["wall_time_s"])
    assert result is not None
    wall = statistics.median(walls)
    loop = statistics.median(loops)
    metrics = statistics.median(w - x for w, x in zip(walls, loops, strict=True))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    iterations = result.summary["simulation"]["iterations"]
    report = {
        "workload": source,
        "estimator": getattr(prepared.estimator, "backend_name", args.estimator),
        "estimator_build_s": build_s,
        "requests": args.requests,
        "capacity_qps": capacity,
        "qps": qps,
        "wall_s_median": wall,
        "wall_s_all": walls,
        "cpu_s_median": statistics.median(cpus),
        "loop_s": loop,
        "metrics_s": metrics,
        "iterations": iterations,
        "requests_per_s": args.requests / wall,
        "iterations_per_s": iterations / wall,
        "peak_rss_mb": peak_mb,
        "p99_scheduling_delay_s": result.summary["latency_s"]["scheduling_delay"]["p99"],
        "completed": result.summary["requests"]["completed"],
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    cap = f"capacity {capacity:.2f} req/s, " if capacity else ""
    print(f"workload: {source}")
    print(f"estimator: {report['estimator']} (built in {build_s:.2f} s)")
    print(f"{args.requests:,} requests at {qps:.2f} req/s ({cap}load {args.load})")
    print(
        f"wall (median of {args.repeat}): {wall:.3f} s  "
        f"[event loop {loop:.3f} s, metrics {metrics:.3f} s, medians of their own]"
    )
    print(f"cpu time (median of {args.repeat}): {report['cpu_s_median']:.3f} s")
    print(f"iterations: {iterations:,}  ->  {report['iterations_per_s']:,.0f} iterations/s")
    print(f"simulated requests/s: {report['requests_per_s']:,.0f}")
    print(f"peak memory (whole process, incl. capacity search): {peak_mb:.0f} MB")
    limit = 0.5 if args.estimator == "roofline" else 1.5
    target = "MET" if wall < limit and peak_mb < 500 else "MISSED"
    print(f"target (< {limit:g} s, < 500 MB): {target}")


if __name__ == "__main__":
    main()
