"""Disaggregated search speed benchmark (issue 10, "Targets").

Runs examples/disagg.yaml (Llama-3.1-70B on H100 and H200, at most 16 GPUs, aggregated
replicas against prefill/decode pools of either SKU, TP 4 or 8, P:D from 1:1 to 2:2 and
1:2 / 2:1, chat traffic, TTFT P90 < 2 s and TBT P99 < 100 ms) on this machine and prints
the wall time, the configurations and simulations, the best of each layout and the
recommendation.

    python benchmarks/disagg_search_speed.py [--executor inline|local|ray] [--json] [--keep DIR]

Target (2 cores): the whole search under 10 minutes.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from search._db import open_database
from search._driver import SearchDriver
from search._pareto import best_configuration, rank_configurations
from search._results_view import with_labels
from search._spec import load_spec

ROOT = Path(__file__).resolve().parents[1]

SPEC = ROOT / "examples" / "disagg.yaml"


def _best(frame) -> dict | None:
    best = best_configuration(rank_configurations(frame)) if len(frame) else None
    if best is None:
        return None
    return {
        "label": best["label"], "qps_per_dollar": float(best["qps_per_dollar"]),
        "capacity_qps": float(best["capacity_qps"]), "num_gpus": int(best["num_gpus"]),
        "ttft_p90_s": float(best["ttft_p90"]), "tbt_p99_s": float(best["tbt_p99"]),
    }  # fmt: skip


def run(spec_path: str, executor: str, db_path: Path) -> dict:
    spec = load_spec(spec_path)
    db = open_database(f"sqlite:///{db_path}")
    started = time.perf_counter()
    report = SearchDriver(spec, db, executor).run()
    wall = time.perf_counter() - started
    frame = with_labels(db.results(report.job_id, status="done"))
    return {
        "spec": spec_path,
        "wall_s": wall,
        "status": report.status,
        "configurations_evaluated": report.evaluated,
        "by_layout": {str(k): int(n) for k, n in frame["layout"].value_counts().items()},
        "infeasible": report.infeasible,
        "over_budget": report.over_budget,
        "failed": report.failed,
        "refined": report.refined,
        "simulations": report.simulations,
        "meet_slos": int(frame["slo_passed"].astype(bool).sum()),
        "best": _best(frame),
        "best_aggregated": _best(frame[frame["layout"] == "aggregated"]),
        "best_disaggregated": _best(frame[frame["layout"] == "disaggregated"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default=str(SPEC))
    parser.add_argument("--executor", choices=["inline", "local", "ray"], default="local")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", type=Path, default=None, help="keep results.db in this folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        out = run(args.spec, args.executor, folder / "results.db")
    if args.json:
        print(json.dumps(out, indent=2))
        return
    layouts = ", ".join(f"{n} {k}" for k, n in sorted(out["by_layout"].items()))
    print(
        f"{out['spec']}: {out['wall_s']:.0f} s wall ({out['status']}), "
        f"{out['configurations_evaluated']} configurations evaluated ({layouts}), "
        f"{out['infeasible']} infeasible, {out['over_budget']} over budget, "
        f"{out['failed']} failed, {out['refined']} refined, {out['simulations']} simulations, "
        f"{out['meet_slos']} meet the SLOs"
    )
    for name in ("best_aggregated", "best_disaggregated", "best"):
        b = out[name]
        if b is None:
            print(f"  {name}: none meets the SLOs")
            continue
        print(
            f"  {name}: {b['label']}: {b['capacity_qps']:.2f} QPS on {b['num_gpus']} GPUs, "
            f"{b['qps_per_dollar']:.4f} QPS per $/h, TTFT P90 {b['ttft_p90_s']:.2f} s, "
            f"TBT P99 {b['tbt_p99_s'] * 1e3:.0f} ms"
        )


if __name__ == "__main__":
    main()
