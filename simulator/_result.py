"""What a simulation hands back: summary, per-request records, per-batch records, traces."""

from __future__ import annotations

import json
import math
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from simulator._engine import Simulation
from simulator._metrics import request_arrays, summarize

if TYPE_CHECKING:  # pandas loads when a table is asked for, not for the summary
    import pandas as pd


class SimulationResult:
    """Results of one run; tables are built on first use."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.summary: dict = summarize(sim)

    @cached_property
    def requests(self) -> pd.DataFrame:
        """One row per request (times in seconds from the start of the run)."""
        import pandas as pd

        return pd.DataFrame(request_arrays(self.sim))

    @cached_property
    def batches(self) -> pd.DataFrame:
        """One row per batch (iteration) of every replica."""
        import pandas as pd

        return pd.DataFrame(self.sim.batches.columns())

    def write_requests(self, path: str | Path) -> Path:
        """Per-request records as CSV, or Parquet when the name ends in .parquet."""
        path = Path(path)
        frame = self.requests
        if path.suffix == ".parquet":
            frame.to_parquet(path, index=False)
        else:
            frame.to_csv(path, index=False)
        return path

    def write_chrome_trace(self, path: str | Path) -> Path:
        """Iterations of every replica stage, and each request's life, as a Chrome / Perfetto
        trace (JSON).

        Batches are named by phase (prefill, decode or mixed) with their requests, tokens and
        KV-block use as args; each request is an async span from arrival to completion with
        its first token as an instant.  Needs a run with `RunOptions(record_stage_times=True)`.
        """
        spans = self.sim.stage_spans
        if spans is None:
            raise ValueError("this run did not record stage times (RunOptions.record_stage_times)")
        events: list[dict] = []
        for replica in self.sim.replicas:
            events.append(
                {"name": "process_name", "ph": "M", "pid": replica.id,
                 "args": {"name": f"replica {replica.id}"}}
            )  # fmt: skip
            names = [f"stage {stage}" for stage in range(self.sim.pp)] + ["requests"]
            for tid, name in enumerate(names):
                events.append(
                    {"name": "thread_name", "ph": "M", "pid": replica.id, "tid": tid,
                     "args": {"name": name}}
                )  # fmt: skip
        rows = self.sim.batches.rows
        for replica_id, stage, start, end, index in spans:
            _, _, _, prefill_tokens, num_prefills, num_decodes, kv_blocks, _, _ = rows[index]
            events.append(
                {"name": _phase(num_prefills, num_decodes), "ph": "X", "pid": replica_id,
                 "tid": stage, "ts": start * 1e6, "dur": (end - start) * 1e6,
                 "args": {"prefills": int(num_prefills), "prefill_tokens": int(prefill_tokens),
                          "decodes": int(num_decodes), "kv_blocks_used": int(kv_blocks)}}
            )  # fmt: skip
        for req in self.sim.requests:
            if req.replica < 0:  # never arrived (a closed loop cut short)
                continue
            common = {"cat": "request", "id": req.id, "pid": req.replica, "tid": self.sim.pp}
            done = req.completed_at if not math.isnan(req.completed_at) else self.sim.now
            events.append(
                {**common, "name": f"request {req.id}", "ph": "b", "ts": req.arrival * 1e6,
                 "args": {"prompt_tokens": req.prompt_tokens, "output_tokens": req.output_tokens,
                          "preemptions": req.preemptions}}
            )  # fmt: skip
            if not math.isnan(req.first_token_at):
                events.append(
                    {**common, "name": "first token", "ph": "n", "ts": req.first_token_at * 1e6}
                )
            events.append({**common, "name": f"request {req.id}", "ph": "e", "ts": done * 1e6})
        path = Path(path)
        path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
        return path


def _phase(num_prefills: float, num_decodes: float) -> str:
    if num_prefills and num_decodes:
        return "mixed"
    return "prefill" if num_prefills else "decode"
