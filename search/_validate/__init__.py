"""`llmcap validate`: the simulator against measured serving results.

A dataset yields `ValidationPoint`s (a deployment, a closed-loop workload as its client
sent it, and the measured mean TTFT and TPOT); each is simulated as its benchmark client
ran it, and the errors are summarised overall and by engine, GPU, model, concurrency and
(where they differ) prompt/output lengths, campaign, weights and client warm-up.
"""

from __future__ import annotations

from search._validate._aic_silicon import (
    DatasetError,
    Selection,
    ValidationPoint,
    catalog_model_name,
    kv_precision_for,
    load_aic_silicon,
    parse_rows,
    select_points,
)
from search._validate._run import PointResult, simulate_point, simulate_points
from search._validate._stats import ErrorStats, concurrency_band, error_stats

__all__ = [
    "DatasetError",
    "ErrorStats",
    "PointResult",
    "Selection",
    "ValidationPoint",
    "catalog_model_name",
    "concurrency_band",
    "error_stats",
    "kv_precision_for",
    "load_aic_silicon",
    "parse_rows",
    "select_points",
    "simulate_point",
    "simulate_points",
]
