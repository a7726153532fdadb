"""Nightly plan rerun benchmark (issue: "Capacity planning on a schedule", section Speed).

Runs `llmcap plan run examples/capacity_plan.yaml` as cron would (a fresh process, the local
process-pool executor, a SQLite database and a report folder in a temporary directory): once
to fill the database, then again REPEATS times with nothing changed.  Reports each run's
wall time (process start to exit, imports included), its exit status and the configurations
and simulations it ran, read from the report it wrote.

    python benchmarks/plan_rerun.py [--repeats 3] [--json]

Target (2 cores): an unchanged rerun simulates nothing and finishes in seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "examples" / "capacity_plan.yaml"


def plan_run(folder: Path) -> dict:
    """One `llmcap plan run` in a fresh interpreter: wall time, exit status, what it ran."""
    command = [
        sys.executable, "-c", "from search.cli import main; main()", "plan", "run", str(PLAN),
        "--db", f"sqlite:///{folder / 'results.db'}", "--out", str(folder / "reports"),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 3):
        sys.exit(f"plan run failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    (report,) = (folder / "reports").glob("*/*/report.json")
    searches = json.loads(report.read_text())["searches"]
    return {"wall_s": round(wall, 2), "exit_status": done.returncode,
            "evaluated": searches["evaluated"], "simulations": searches["simulations"],
            "reused": searches["reused"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="Unchanged reruns to time.")
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="plan-rerun-") as tmp:
        first = plan_run(Path(tmp))
        reruns = [plan_run(Path(tmp)) for _ in range(args.repeats)]
    out = {
        "plan": str(PLAN.relative_to(ROOT)),
        "cpus": os.cpu_count(),
        "first_run": first,
        "reruns": reruns,
        "rerun_median_wall_s": statistics.median(r["wall_s"] for r in reruns),
        "rerun_simulations": sum(r["simulations"] + r["evaluated"] for r in reruns),
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{out['plan']} on {out['cpus']} CPUs")
    for name, r in [("first run", first)] + [(f"rerun {i + 1}", r) for i, r in enumerate(reruns)]:
        print(f"  {name:10s} {r['wall_s']:6.2f} s  exit {r['exit_status']}  "
              f"{r['evaluated']} simulated ({r['simulations']} simulations), "
              f"{r['reused']} reused")  # fmt: skip
    print(f"unchanged rerun: median {out['rerun_median_wall_s']:.2f} s, "
          f"{out['rerun_simulations']} simulations")  # fmt: skip


if __name__ == "__main__":
    main()
