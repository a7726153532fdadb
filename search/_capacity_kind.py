"""What a stored capacity rests on: a measurement, or only the analytic ceiling.

Written by the capacity search (`search._capacity`), stored with each result, read by the
rankings, frontiers and plots (`search._pareto`, `search._plot`) and the end-of-run summary.
"""

from __future__ import annotations

__all__ = ["CAPACITY_CEILING", "CAPACITY_MEASURED"]

CAPACITY_MEASURED = "measured"  # a failing rate bounds the capacity (or none passes: 0)
CAPACITY_CEILING = "ceiling"  # passed up to the analytic ceiling: no failing rate known
