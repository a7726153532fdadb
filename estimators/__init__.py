"""Cost models: model architectures -> operator costs, and the memory planner.

The simulator asks one question per iteration (see `BatchShape` / `BatchCost`);
backends such as the roofline model answer it.
"""

from __future__ import annotations

from estimators._contract import BatchCost, BatchShape, ExecutionTimeEstimator
from estimators._types import ModelArchitecture, Precision

__all__ = [
    "BatchCost",
    "BatchShape",
    "ExecutionTimeEstimator",
    "ModelArchitecture",
    "Precision",
]
