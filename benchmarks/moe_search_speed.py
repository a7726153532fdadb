"""MoE search speed benchmark (issue: "Today's models", section Targets).

Runs examples/moe_deepseek.yaml: DeepSeek-V3 with FP8 weights under SGLang on H200 or B200,
attention TP {4, 8}, attention DP {1, 2, 4}, EP {8, 16, 32}, 1-2 replicas, at most 32 GPUs,
every feasible configuration's capacity to 10%, on this machine; prints the wall time, the
configurations evaluated and dropped as infeasible, and the recommended deployment.

    python benchmarks/moe_search_speed.py [--executor local|ray|inline] [--json] [--keep DIR]

Target (2 cores): the whole search under 10 minutes.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from search_speed import run  # noqa: E402

from search._spec import load_spec  # noqa: E402

SPEC = ROOT / "examples" / "moe_deepseek.yaml"
TARGET_S = 600.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default=str(SPEC))
    parser.add_argument("--executor", choices=["local", "ray", "inline"], default="local")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", type=Path, default=None, help="keep the results database here")
    args = parser.parse_args()

    spec = load_spec(args.spec)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        r = run(spec, args.executor, folder / "moe_search.db")
    r["within_target"] = r["wall_s"] < TARGET_S
    if args.json:
        print(json.dumps({"spec": args.spec, "search": r}, indent=2))
        return
    print(
        f"{spec.name}: {r['wall_s']:.0f} s wall (target {TARGET_S:.0f} s: "
        f"{'met' if r['within_target'] else 'MISSED'}), {r['configurations_evaluated']} "
        f"configurations evaluated, {r['infeasible']} infeasible dropped, {r['failed']} failed, "
        f"{r['simulations']} simulations; capacity search median "
        f"{r['capacity_search_s_median']:.2f} s, max {r['capacity_search_s_max']:.2f} s"
    )
    print(f"recommended: {r['best']} ({r['best_qps_per_dollar']} QPS per $/h)")
    print("top 5: " + "; ".join(r["top5"]))


if __name__ == "__main__":
    main()
