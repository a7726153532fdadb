"""Start-up benchmark (issue "Search speed", section Start-up): short commands end to end,
each in a fresh interpreter, as a user runs them.

- ``llmcap --help``: target under 0.3 s.
- Vidur's own run (tests/search/test_vidur_reproduction.py): Llama-2-70B TP2-PP2 Sarathi on
  A100-80GB, 512 arxiv-summarization requests at 1 QPS, ``llmcap simulate ... --json``:
  target under 0.5 s (the simulation itself is about 0.1 s; the rest is imports and the
  trace read).

Each command runs ``--repeat`` times; the report gives the median wall time and the peak
memory of the process.  ``--root`` times another checkout's code (for before/after
comparisons on a shared machine, alternate the two with ``--repeat 1`` several times).

    python benchmarks/startup_speed.py [--repeat 7] [--root PATH] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent / "shared" / "data" / "traces" / "vidur_arxiv_summarization_4k.csv"

VIDUR_RUN = [
    "simulate", "--model", "meta-llama/Llama-2-70b-hf", "--sku", "a100-80gb", "--tp", "2",
    "--pp", "2", "--scheduler", "sarathi", "--chunk-size", "512", "--batch-size", "128",
    "--engine", "vidur", "--qps", "1", "--num-requests", "512", "--json",
]  # fmt: skip
TARGETS = {"help": 0.3, "vidur_512": 0.5}


def run_once(root: Path, args: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of `llmcap ARGS` run from `root`'s code."""
    command = [sys.executable, "-c", "from search.cli import main; main()", *args]
    env = {**os.environ, "PYTHONPATH": str(root)}
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"llmcap {' '.join(args)} exited {proc.returncode}")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout whose code runs")
    parser.add_argument("--trace", type=Path, default=TRACE, help="Vidur arxiv trace CSV")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    workload = str(args.trace) if args.trace.is_file() else "summarization"
    if workload == "summarization":
        print(f"note: {args.trace} not found; using the built-in 'summarization'", file=sys.stderr)
    commands = {"help": ["--help"], "vidur_512": [*VIDUR_RUN, "--workload", workload]}
    report: dict[str, dict] = {}
    for name, argv in commands.items():
        runs = [run_once(args.root.resolve(), argv) for _ in range(args.repeat)]
        walls = [w for w, _ in runs]
        report[name] = {
            "wall_s_median": statistics.median(walls),
            "wall_s_all": walls,
            "peak_rss_mb": max(m for _, m in runs),
            "target_s": TARGETS[name],
        }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for name, r in report.items():
        verdict = "MET" if r["wall_s_median"] < r["target_s"] else "MISSED"
        print(
            f"{name}: median {r['wall_s_median']:.3f} s of {args.repeat} "
            f"(min {min(r['wall_s_all']):.3f} s), peak {r['peak_rss_mb']:.0f} MB; "
            f"target < {r['target_s']:g} s: {verdict}"
        )


if __name__ == "__main__":
    main()
