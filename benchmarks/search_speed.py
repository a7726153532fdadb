"""Search speed benchmark (issue: "Search service", section Speed).

Runs the Vidur paper's what-if space for Llama-2-70B on a chat workload
(examples/vidur_llama2_70b_chat.yaml: A100-80GB and H100, TP and PP in {1, 2, 4},
vLLM / Orca / Sarathi-Serve, batch caps 32-512, chunk sizes 512/1K/2K, at most 16 GPUs)
on this machine and reports the wall time, the simulations run, the configurations
evaluated and the slowest single capacity search.  The spec searches every configuration
to 5% and refines to 1% those that could still change the recommendation.  With
--reference it runs the same grid again with every configuration at 1% (no refinement)
and checks that both pick the same best configuration.

    python benchmarks/search_speed.py [--executor ray|local] [--reference] [--complete]
        [--filters-in-capacity] [--json] [--keep DIR]

By default the search wants only the best configuration (`strategy.prune: true`: those
that cannot beat the best found are not searched to the end); --complete searches them
all (complete frontiers).  The reference never prunes.

Targets (2 cores, issue 13): the whole search under 60 s with the same best configuration as
the exhaustive grid at fine tolerance (--reference); with --filters-in-capacity, under 5
minutes.  On a machine shared with other work, read the CPU seconds: half of them is the
wall time on two idle cores.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

from search._db import open_database
from search._driver import SearchDriver
from search._pareto import best_configuration, rank_configurations
from search._results_view import with_labels
from search._spec import load_spec

ROOT = Path(__file__).resolve().parents[1]

SPEC = ROOT / "examples" / "vidur_llama2_70b_chat.yaml"


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime


def run(spec, executor: str, db_path: Path) -> dict:
    db = open_database(f"sqlite:///{db_path}")
    started = time.perf_counter()
    cpu_before = _cpu_seconds()
    report = SearchDriver(spec, db, executor).run()
    wall = time.perf_counter() - started
    cpu = _cpu_seconds() - cpu_before
    frame = with_labels(db.results(report.job_id, status="done"))
    kinds = frame["capacity_kind"].value_counts()
    ranked = rank_configurations(frame)
    best = best_configuration(ranked)
    return {
        "tolerance": spec.capacity.tolerance,
        "wall_s": wall,
        # this process and its finished workers (the local executor's): on a machine shared
        # with other work, cpu_s / 2 is the wall time two idle cores would take
        "cpu_s": cpu,
        "configurations_evaluated": report.evaluated,
        "refined": report.refined,
        "pruned": len(report.pruned),
        "infeasible": report.infeasible,
        "failed": report.failed,
        "simulations": report.simulations,
        "capacity_search_s_median": float(frame["wall_time_s"].median()),
        "capacity_search_s_max": float(frame["wall_time_s"].max()),
        "capacity_kinds": {str(kind): int(n) for kind, n in kinds.items()},
        "lengthened": int((frame["num_requests"] > spec.workload.num_requests).sum()),
        "rejecting": int((frame["rejected_requests"] > 0).sum()),
        "best": None if best is None else best["label"],
        "best_qps_per_dollar": None if best is None else float(best["qps_per_dollar"]),
        "top5": list(ranked["label"].head(5)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default=str(SPEC))
    parser.add_argument("--executor", choices=["ray", "local"], default="ray")
    parser.add_argument("--reference", action="store_true", help="also run at 1%% tolerance")
    parser.add_argument(
        "--complete", action="store_true",
        help="search every configuration (no strategy.prune): complete frontiers",
    )  # fmt: skip
    parser.add_argument(
        "--filters-in-capacity", action="store_true",
        help="slo.capacity_meets_filters: true (the capacity meets the TTFT/TBT filters too)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--keep", type=Path, default=None, help="keep the results databases in this folder"
    )
    args = parser.parse_args()

    spec = load_spec(args.spec)
    if not args.complete:  # only the best is wanted: prune what cannot beat it
        spec = spec.model_copy(
            update={"strategy": spec.strategy.model_copy(update={"prune": True})}
        )
    if args.filters_in_capacity:
        slo = spec.slo.model_copy(update={"capacity_meets_filters": True})
        spec = spec.model_copy(update={"slo": slo})
    out: dict = {"spec": args.spec, "capacity_meets_filters": spec.slo.capacity_meets_filters}
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        out["search"] = run(spec, args.executor, folder / "search.db")
        if args.reference:
            every_fine = {"tolerance": 0.01, "refine_tolerance": None}
            fine = spec.model_copy(
                update={
                    "capacity": spec.capacity.model_copy(update=every_fine),
                    "strategy": spec.strategy.model_copy(update={"prune": False}),
                }
            )
            out["reference"] = run(fine, args.executor, folder / "reference.db")
            out["same_best"] = out["search"]["best"] == out["reference"]["best"]
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for name in ("search", "reference"):
        if name not in out:
            continue
        r = out[name]
        print(
            f"{name} (tolerance {r['tolerance']:.0%}): {r['wall_s']:.0f} s wall, "
            f"{r['cpu_s']:.0f} s CPU, "
            f"{r['configurations_evaluated']} configurations evaluated "
            f"({r['infeasible']} infeasible dropped, {r['failed']} failed), "
            f"{r['refined']} refined, {r['pruned']} pruned, "
            f"{r['simulations']} simulations; capacity search median "
            f"{r['capacity_search_s_median']:.2f} s, max {r['capacity_search_s_max']:.2f} s"
        )
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(r["capacity_kinds"].items()))
        print(
            f"  capacities: {kinds}; {r['lengthened']} on a lengthened workload; "
            f"{r['rejecting']} configurations reject requests"
        )
        print(f"  best: {r['best']} ({r['best_qps_per_dollar']})")
    if "same_best" in out:
        print(f"same best configuration as the fine-tolerance grid: {out['same_best']}")


if __name__ == "__main__":
    main()
