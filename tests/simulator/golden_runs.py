"""Fixed small simulations whose outputs `test_golden.py` pins (the golden values).

Several schedulers on a real cost model (the roofline), with the KV cache cut down so
that requests are preempted and recomputed, and one pipeline-parallel deployment (two
lanes).  Regenerate the golden file only when a change of results is intended:

    PYTHONPATH=. python -m tests.simulator.golden_runs
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from estimators import load_model
from simulator import (
    Deployment,
    RunOptions,
    SchedulerConfig,
    SchedulerKind,
    prepare,
    request_arrays,
)
from sku_catalog import load_catalog
from workloads import Workload

GOLDEN = Path(__file__).with_name("data") / "golden_runs.json"

# per-request columns pinned (the others derive from these)
REQUEST_COLUMNS = ("replica", "scheduled", "first_token", "completed", "preemptions")

SCENARIOS: dict[str, dict] = {
    "vllm": {"scheduler": SchedulerConfig(SchedulerKind.VLLM, batch_size=32)},
    "orca": {"scheduler": SchedulerConfig(SchedulerKind.ORCA, batch_size=32)},
    "sarathi": {
        "scheduler": SchedulerConfig(SchedulerKind.SARATHI, batch_size=32, chunk_size=256)
    },
    "sarathi_pp2_2rep": {
        "scheduler": SchedulerConfig(SchedulerKind.SARATHI, batch_size=16, chunk_size=512),
        "pp": 2,
        "num_replicas": 2,
        "gpu_memory_utilization": 0.11,
    },
    "sglang": {
        "scheduler": SchedulerConfig(SchedulerKind.SGLANG, batch_size=32, chunk_size=512)
    },
    "static": {"scheduler": SchedulerConfig(SchedulerKind.STATIC, batch_size=8)},
}


def workload(n: int = 80, qps: float = 20.0, seed: int = 7) -> Workload:
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / qps, n))
    prompts = rng.integers(64, 1200, n)
    outputs = rng.integers(1, 250, n)
    return Workload("golden", arrivals, prompts, outputs, None)


def run(name: str) -> dict:
    """One scenario's per-request columns and batch log, as plain lists."""
    args = {"gpu_memory_utilization": 0.19} | SCENARIOS[name]  # KV of a few thousand tokens
    deployment = Deployment(
        model=load_model("meta-llama/Llama-2-7b-hf"),
        sku=load_catalog().get("a100-80gb"),
        **args,
    )
    result = prepare(deployment).simulate(workload(), RunOptions())
    sim = result.sim
    cols = request_arrays(sim)
    return {
        "requests": {c: cols[c].tolist() for c in REQUEST_COLUMNS},
        "batches": batch_log_digest(sim.batches.columns()),
        # percentiles of every latency metric, TBT (token gaps) included
        "latency_s": result.summary["latency_s"],
    }


def batch_log_digest(columns: dict[str, np.ndarray]) -> dict:
    """The batch log in little room: its length, every column's sum (to say which column
    moved) and a SHA-256 of all its float64 values (exact equality)."""
    table = np.stack([np.ascontiguousarray(v, dtype="<f8") for v in columns.values()])
    return {
        "rows": int(table.shape[1]),
        "sums": {c: float(np.sum(v)) for c, v in columns.items()},
        "sha256": hashlib.sha256(table.tobytes()).hexdigest(),
    }


def main() -> None:
    golden = {name: run(name) for name in SCENARIOS}
    GOLDEN.write_text(json.dumps(golden, separators=(",", ":")) + "\n")
    for name, g in golden.items():
        print(
            f"{name}: {g['batches']['rows']} batches, "
            f"{int(sum(g['requests']['preemptions']))} preemptions"
        )
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
