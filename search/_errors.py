"""Turning user-input errors into one clear line (and exit code 2), never a traceback."""

from __future__ import annotations

from pydantic import ValidationError

from estimators import DoesNotFitError, ModelConfigError, ParallelismError, UnknownModelError
from search._db import DatabaseError
from search._executors import ExecutorError
from search._ray_jobs import RayJobsError
from sku_catalog import CatalogError
from workloads import WorkloadError


class SpecError(ValueError):
    """A spec or config file that cannot be read."""


class PlotError(ValueError):
    """A plot that cannot be drawn (nothing to plot, an unknown file type, plotly missing)."""


# errors whose message is written for the user as it stands
USER_ERRORS: tuple[type[Exception], ...] = (
    CatalogError,
    UnknownModelError,
    ModelConfigError,
    WorkloadError,
    ParallelismError,
    DoesNotFitError,
    FileNotFoundError,
    SpecError,
    DatabaseError,
    ExecutorError,
    RayJobsError,
    PlotError,
)


def format_validation_error(error: ValidationError, source: str) -> str:
    """Each problem as `field: message (got: value)`, one per line."""
    lines = [f"invalid {source}:"]
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"]) or "(top level)"
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown field"
        got = item.get("input")
        shown = "" if isinstance(got, dict) or item["type"] == "missing" else f" (got: {got!r})"
        lines.append(f"  {field}: {message}{shown}")
    return "\n".join(lines)
