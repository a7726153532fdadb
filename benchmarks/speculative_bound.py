"""The analytic capacity bound under speculative decoding, against the searched capacity.

For a few speculative configurations (EAGLE, 3 proposals, 70% accepted; the space of
examples/speculative.yaml and a few more policies) on the built-in chat workload, prints the
steady-state bound (`service_bound`), the finite-run bound (`throughput_upper_bound`), the
capacity a search finds (P99 scheduling delay < 5 s, 2% tolerance) and the smallest rate
found failing: the capacity must stay under the finite-run bound, and the closer the
bounds are to it the fewer probes a search needs and the more a best-only job prunes.
Only the public functions are used, so the script runs on any version of llmcap to compare
bounds before and after a change.

    python benchmarks/speculative_bound.py [--requests 400] [--json]
"""

from __future__ import annotations

import argparse
import json

from estimators import SpeculativeConfig, load_engine, load_model
from search._capacity import (
    CapacitySearchOptions,
    find_capacity,
    throughput_upper_bound,
)
from simulator import Deployment, engine_scheduler, prepare, service_bound
from sku_catalog import load_catalog
from workloads import build_workload

LLAMA_8B = "meta-llama/Llama-3.1-8B"
EAGLE = SpeculativeConfig("eagle", 3, 0.7)
# (sku, engine, policy or None for the engine's, batch cap)
CASES = (
    ("h100-sxm", "vllm", None, 16),
    ("h100-sxm", "vllm", None, 256),
    ("h200", "vllm", None, 16),
    ("h200", "vllm", None, 256),
    ("h200", "vllm", "vllm", 256),  # prefill-first: prompt and decode batches apart
    ("h200", "sglang", None, 256),
    ("h200", "trtllm", None, 256),
)


def run_case(sku_id: str, engine_name: str, kind: str | None, batch: int, workload) -> dict:
    sku, engine = load_catalog().get(sku_id), load_engine(engine_name)
    scheduler = engine_scheduler(engine, sku, 1, kind=kind, batch_size=batch, chunk_size=2048,
                                 max_tokens=2048)  # fmt: skip
    prepared = prepare(Deployment(load_model(LLAMA_8B), sku, engine=engine,
                                  scheduler=scheduler, speculative=EAGLE))  # fmt: skip
    found = find_capacity(prepared, workload, CapacitySearchOptions(tolerance=0.02))
    upper = throughput_upper_bound(prepared, workload)
    steady = service_bound(prepared, workload).steady_qps
    # every request at once: the rate the deployment serves flat out (its busy stretch)
    flat_out = prepared.simulate(workload.with_arrival_times(0.0 * workload.arrival_times))
    return {
        "config": f"{sku_id} {engine.key} {scheduler.kind.value} b{batch} budget 2048",
        "steady_bound_qps": steady,
        "saturated_qps": flat_out.summary["throughput"]["requests_per_s"],
        "finite_run_bound_qps": upper,
        "capacity_qps": found.capacity_qps,
        "failing_qps": found.failing_qps,
        "simulations": found.num_simulations,
        "bound_holds": found.capacity_qps <= upper,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print rows as JSON")
    args = parser.parse_args()
    workload = build_workload({"source": "chat"}, num_requests=args.requests, qps=1.0,
                              concurrency=None, seed=args.seed)  # fmt: skip
    rows = [run_case(*case, workload) for case in CASES]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'configuration':<44} {'steady':>8} {'flat out':>8} {'finite':>8} {'capacity':>9} "
          f"{'failing':>8} sims")  # fmt: skip
    for r in rows:
        print(f"{r['config']:<44} {r['steady_bound_qps']:8.2f} {r['saturated_qps']:8.2f} "
              f"{r['finite_run_bound_qps']:8.2f} "
              f"{r['capacity_qps']:9.2f} {r['failing_qps']:8.2f} {r['simulations']:4d}"
              f"{'' if r['bound_holds'] else '  BOUND BROKEN'}")  # fmt: skip


if __name__ == "__main__":
    main()
