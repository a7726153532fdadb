"""What a simulation hands back: summary, per-request records, per-batch records, traces."""

from __future__ import annotations

import json
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
        """Iterations of every replica stage as a Chrome / Perfetto trace (JSON).

        Needs a run with `RunOptions(record_stage_times=True)`.
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
            for stage in range(self.sim.pp):
                events.append(
                    {"name": "thread_name", "ph": "M", "pid": replica.id, "tid": stage,
                     "args": {"name": f"stage {stage}"}}
                )  # fmt: skip
        for replica_id, stage, start, end in spans:
            events.append(
                {"name": "batch", "ph": "X", "pid": replica_id, "tid": stage,
                 "ts": start * 1e6, "dur": (end - start) * 1e6}
            )  # fmt: skip
        path = Path(path)
        path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
        return path
