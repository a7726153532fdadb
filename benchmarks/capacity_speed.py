"""Capacity-search speed benchmark (issue: "Capacity search per configuration").

Times `search._capacity.find_capacity` for a few configurations on the built-in
chat workload (Poisson arrivals, 2000 requests by default), with the default
options (P99 scheduling delay < 5 s, 5 % tolerance, early stop).  Target on the
2-core CI machine (issue 13): under 2 s for every configuration, with or without
--filters.  With --fine it also runs a 1 % tolerance search without early stop,
to show how close the default bisection gets.  With --filters the capacity must also
meet the Vidur-paper filters (as `slo.capacity_meets_filters: true` does).

    python benchmarks/capacity_speed.py [--requests 2000] [--fine] [--filters] [--only TEXT]
        [--probes] [--json] [--pipeline-events-through-loop]

--pipeline-events-through-loop times pipeline-parallel replicas without their decode run
(`Replica._run_pipeline_decodes`): every event through the event loop and the policy, as
before it, for a comparison under the same machine load (the results are the same).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from estimators import load_model
from search._capacity import (
    CapacitySearchOptions,
    LatencySLO,
    find_capacity,
)
from simulator import (
    Deployment,
    SchedulerConfig,
    SchedulerKind,
    prepare,
    service_bound,
)
from sku_catalog import load_catalog
from workloads import build_workload

LLAMA_7B = "meta-llama/Llama-2-7b-hf"
LLAMA_70B = "meta-llama/Llama-2-70b-hf"


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    model: str
    sku: str
    tp: int
    pp: int
    scheduler: SchedulerKind
    replicas: int = 1


CASES = (
    Case("7B A100 TP1 sarathi", LLAMA_7B, "a100-80gb", 1, 1, SchedulerKind.SARATHI),
    Case("7B A100 TP1 vllm", LLAMA_7B, "a100-80gb", 1, 1, SchedulerKind.VLLM),
    Case("7B A100 TP1 orca", LLAMA_7B, "a100-80gb", 1, 1, SchedulerKind.ORCA),
    Case("70B H100 TP4 PP1 sarathi", LLAMA_70B, "h100-sxm", 4, 1, SchedulerKind.SARATHI),
    Case("70B H100 TP2 PP2 sarathi", LLAMA_70B, "h100-sxm", 2, 2, SchedulerKind.SARATHI),
    Case("70B A100 TP4 sarathi", LLAMA_70B, "a100-80gb", 4, 1, SchedulerKind.SARATHI),
    # the slowest of the Vidur-paper space: little KV memory left, so a low capacity
    # and long simulated time of small batches
    Case("70B H100 TP1 PP2 sarathi", LLAMA_70B, "h100-sxm", 1, 2, SchedulerKind.SARATHI),
    Case("70B A100 TP1 PP2 orca", LLAMA_70B, "a100-80gb", 1, 2, SchedulerKind.ORCA),
    # with --filters, the slowest: TBT P99 < 200 ms holds only near zero load
    Case("70B A100 TP1 PP4 sarathi", LLAMA_70B, "a100-80gb", 1, 4, SchedulerKind.SARATHI),
)


# the Vidur-paper filters, as `slo.capacity_meets_filters: true` makes the capacity meet them
FILTERS = (LatencySLO("ttft", 90, 2.0), LatencySLO("tbt", 99, 0.2))


def run_case(case: Case, workload, fine: bool, also: tuple = ()) -> dict:
    deployment = Deployment(
        model=load_model(case.model),
        sku=load_catalog().get(case.sku),
        tp=case.tp,
        pp=case.pp,
        num_replicas=case.replicas,
        scheduler=SchedulerConfig(case.scheduler, batch_size=128, chunk_size=512),
    )
    prepared = prepare(deployment)
    result = find_capacity(prepared, workload, CapacitySearchOptions(also=also))
    row = {
        "config": case.name,
        "capacity_qps": result.capacity_qps,
        "upper_bound_qps": result.upper_bound_qps,
        "steady_bound_qps": service_bound(prepared, workload).steady_qps,
        "simulations": result.num_simulations,
        "early_stopped": sum(p.stopped_early for p in result.probes),
        "wall_s": result.wall_time_s,
        "probes": [(round(p.qps, 3), p.passed, round(p.wall_s, 3)) for p in result.probes],
    }
    if fine:
        ref = find_capacity(
            prepared,
            workload,
            CapacitySearchOptions(also=also, tolerance=0.01, max_simulations=40, early_stop=False),
        )
        row |= {
            "fine_capacity_qps": ref.capacity_qps,
            "fine_simulations": ref.num_simulations,
            "fine_wall_s": ref.wall_time_s,
            "gap": result.capacity_qps / ref.capacity_qps - 1 if ref.capacity_qps else None,
        }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--source", default="chat", help="built-in workload or trace path")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fine", action="store_true", help="also a 1%% tolerance reference")
    parser.add_argument("--probes", action="store_true", help="print every probe")
    parser.add_argument(
        "--filters", action="store_true",
        help="the capacity must also meet TTFT P90 < 2 s and TBT P99 < 200 ms",
    )  # fmt: skip
    parser.add_argument(
        "--only", action="append", default=None, metavar="TEXT",
        help="run only the configurations whose name contains TEXT (repeatable)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--pipeline-events-through-loop", action="store_true",
        help="pipeline replicas without their decode run (for comparison)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.pipeline_events_through_loop:
        from simulator._replica import Replica

        Replica._run_pipeline_decodes = lambda self, now: False

    workload = build_workload(
        {"source": args.source}, num_requests=args.requests, qps=1.0, concurrency=None,
        seed=args.seed,
    )  # fmt: skip
    also = FILTERS if args.filters else ()
    cases = [c for c in CASES if args.only is None or any(t in c.name for t in args.only)]
    rows = [run_case(case, workload, args.fine, also) for case in cases]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    slos = ", ".join(["scheduling_delay_p99 < 5 s", *(f.label() for f in also)])
    print(f"workload {args.source}, {args.requests} requests, {slos}, tol 5%")
    head = f"{'configuration':28} {'capacity':>9} {'bound':>7} {'cap/bnd':>7} {'sims':>4} "
    head += f"{'(early)':>7} {'wall s':>7}"
    if args.fine:
        head += f" {'fine 1%':>8} {'sims':>4} {'wall s':>7} {'gap':>7}"
    print(head)
    for r in rows:
        line = (
            f"{r['config']:28} {r['capacity_qps']:9.3f} {r['upper_bound_qps']:7.3f} "
            f"{r['capacity_qps'] / r['upper_bound_qps']:7.2f} {r['simulations']:4d} "
            f"{r['early_stopped']:7d} {r['wall_s']:7.2f}"
        )
        if args.fine:
            gap = r["gap"]
            line += (
                f" {r['fine_capacity_qps']:8.3f} {r['fine_simulations']:4d} "
                f"{r['fine_wall_s']:7.2f} {'' if gap is None else f'{gap:+7.1%}'}"
            )
        print(line)
        if args.probes:
            print("    probes (qps, passed, wall s):", r["probes"])
    worst = max(r["wall_s"] for r in rows)
    print(f"slowest configuration: {worst:.2f} s (target < 2 s)")


if __name__ == "__main__":
    main()
