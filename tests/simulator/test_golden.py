"""Golden outputs: fixed runs of several schedulers, with preemptions under KV pressure,
must give the per-request times, the batch log and the latency percentiles recorded in
`data/golden_runs.json` (see `golden_runs.py`).  A speed-up of the core must not move
any of them."""

from __future__ import annotations

import json
import math

import pytest

from tests.simulator.golden_runs import GOLDEN, SCENARIOS, run

REL = 1e-12


def _close(a: float, b: float) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b or abs(a - b) <= REL * max(abs(a), abs(b))


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN.read_text())


def test_golden_runs_are_nontrivial(golden: dict) -> None:
    assert set(golden) == set(SCENARIOS)
    preempted = [n for n, g in golden.items() if sum(g["requests"]["preemptions"]) > 0]
    assert {"vllm", "orca", "sarathi", "sarathi_pp2_2rep", "sglang"} <= set(preempted)
    assert all(g["batches"]["rows"] > 1000 for g in golden.values())


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_run_matches_golden(name: str, golden: dict) -> None:
    want = golden[name]
    got = json.loads(json.dumps(run(name)))  # the same float round trip as the file
    for column, values in want["requests"].items():
        moved = [
            i for i, (a, b) in enumerate(zip(got["requests"][column], values, strict=True))
            if not _close(a, b)
        ]  # fmt: skip
        assert moved == [], f"{name}: requests' {column} moved (first {moved[:5]})"
    assert got["batches"]["rows"] == want["batches"]["rows"]
    for column, total in want["batches"]["sums"].items():
        assert _close(got["batches"]["sums"][column], total), f"{name}: batch {column} moved"
    assert got["batches"]["sha256"] == want["batches"]["sha256"], f"{name}: batch log moved"
    for metric, stats in want["latency_s"].items():
        for stat, value in stats.items():
            assert _close(got["latency_s"][metric][stat], value), f"{name}: {metric} {stat}"
