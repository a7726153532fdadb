"""Trace-loading benchmark: how long `workloads.load_trace` takes on each public trace in
../shared/data/traces (the Azure 2023, Vidur and Mooncake formats), in this process after
the imports.  A trace without timestamps takes Poisson arrivals at 1 QPS.  Target: under
1 s for each (the largest, Mooncake's conversation trace, holds 12,031 requests with their
prompt-block hashes).

    python benchmarks/trace_load_speed.py [--repeat 5] [--traces DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workloads import load_trace, read_trace  # noqa: E402

TRACES = ROOT.parent / "shared" / "data" / "traces"
TARGET_S = 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--traces", type=Path, default=TRACES, help="folder of trace files")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    paths = sorted(p for p in args.traces.glob("*") if p.suffix in (".csv", ".jsonl"))
    if not paths:
        raise SystemExit(f"no .csv or .jsonl traces in {args.traces}")
    report: dict[str, dict] = {}
    for path in paths:
        qps = None if read_trace(path).arrival_times is not None else 1.0
        walls = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            workload = load_trace(path, target_qps=qps)
            walls.append(time.perf_counter() - started)
        report[path.name] = {
            "requests": len(workload),
            "wall_s_median": statistics.median(walls),
            "wall_s_all": walls,
        }
    if args.json:
        print(json.dumps({"target_s": TARGET_S, "traces": report}, indent=2))
        return
    for name, r in report.items():
        verdict = "MET" if r["wall_s_median"] < TARGET_S else "MISSED"
        print(
            f"{name}: {r['requests']:,} requests, median {r['wall_s_median']:.3f} s of "
            f"{args.repeat} (max {max(r['wall_s_all']):.3f} s); target < {TARGET_S:g} s: {verdict}"
        )


if __name__ == "__main__":
    main()
