"""Pareto frontiers and the ranking of evaluated configurations (pure pandas/numpy, no plotting).

A configuration's result row carries QPS per dollar (to maximize) and latency percentiles (to
minimize). Row ``a`` *dominates* row ``b`` on a frontier when ``a`` is at least as good on both
columns and strictly better on one. The frontier is the set of rows no other row dominates.

Exact ties: rows with the identical (maximize, minimize) pair are one point. The front keeps one
of them, the one with the smallest index label (the first in index order), so the front is the
same whatever the order of the rows. Rows with a missing or non-finite value (NaN, None, +/-inf)
in either column have no result to place and are left out.

The ranking is the order in which configurations are recommended: SLO-passing first, then
measured capacities before those resting on the analytic ceiling, then by the objective (QPS per
dollar) descending, ties broken by fewer GPUs, then by the configuration label, then by the
configuration id, so it does not depend on the order of the rows.

A capacity "rests on the ceiling" (``capacity_kind`` "ceiling") when the search passed at the
deployment's analytic throughput ceiling on the longest workload it was allowed: no rate was seen
to fail, and the ceiling, an upper bound, stands in for a measurement.  Such a configuration is
recommended only when no measured one meets the SLOs; :func:`ceiling_rival` names the one a
ranking on QPS per dollar alone would have picked instead, so that callers can say so.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from search._capacity_kind import CAPACITY_CEILING, CAPACITY_MEASURED

__all__ = [
    "FRONTIERS",
    "Frontier",
    "best_configuration",
    "capacity_kinds",
    "ceiling_rival",
    "job_frontier",
    "pareto_front",
    "qualifying",
    "rank_configurations",
    "refinement_contenders",
]


@dataclass(frozen=True, slots=True)
class Frontier:
    """One stored frontier: ``maximize`` against ``minimize``, with axis labels for plots.

    ``label_x`` names the minimized column (a latency in seconds; plots add the unit they show),
    ``label_y`` the maximized one.
    """

    name: str
    maximize: str
    minimize: str
    label_x: str
    label_y: str


FRONTIERS: tuple[Frontier, ...] = (
    Frontier(
        name="qps_per_dollar-vs-ttft_p90",
        maximize="qps_per_dollar",
        minimize="ttft_p90",
        label_x="TTFT P90",
        label_y="QPS per $/h",
    ),
    Frontier(
        name="qps_per_dollar-vs-tbt_p99",
        maximize="qps_per_dollar",
        minimize="tbt_p99",
        label_x="TBT P99",
        label_y="QPS per $/h",
    ),
)


def _require(frame: pd.DataFrame, *columns: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(
            f"frame has no column {', '.join(map(repr, missing))} "
            f"(columns: {', '.join(map(str, frame.columns)) or 'none'})"
        )


def _floats(series: pd.Series) -> np.ndarray:
    """A column as float64, missing values (None, pd.NA, NaN) as NaN."""
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)


def _index_order(index: pd.Index) -> np.ndarray:
    """Each row's position in sorted index order (its rank), to break exact ties independently
    of row order; the row position where the labels cannot be compared."""
    try:
        order = np.argsort(index.to_numpy(), kind="stable")
    except TypeError:
        return np.arange(len(index))
    ranks = np.empty(len(index), dtype=np.int64)
    ranks[order] = np.arange(len(index))
    return ranks


def pareto_front(frame: pd.DataFrame, maximize: str, minimize: str) -> list[Hashable]:
    """Index labels of the non-dominated rows, ordered by ``minimize`` ascending.

    Maximizes column ``maximize`` and minimizes column ``minimize``. Rows with a missing or
    non-finite value in either column are excluded. Of rows with the identical pair of values
    only the one with the smallest index label is kept. Along the returned front both columns
    strictly increase. O(n log n).
    """
    _require(frame, maximize, minimize)
    up = _floats(frame[maximize])
    down = _floats(frame[minimize])
    valid = np.flatnonzero(np.isfinite(up) & np.isfinite(down))
    if valid.size == 0:
        return []
    tie = _index_order(frame.index)[valid]
    # minimize ascending, then maximize descending, then index order: the first row of a group
    # with the same `minimize` value is its best (and, among exact ties, the first by index)
    order = valid[np.lexsort((tie, -up[valid], down[valid]))]
    kept: list[int] = []
    best = -np.inf
    for position in order:
        if up[position] > best:  # strictly better than every row with a smaller `minimize`
            kept.append(int(position))
            best = up[position]
    return frame.index[kept].tolist()




def capacity_kinds(frame: pd.DataFrame) -> pd.Series:
    """Each row's capacity kind, "measured" or "ceiling", indexed like ``frame``.

    The ``capacity_kind`` column where it is set.  A row without one (a result stored
    before kinds were recorded) rests on the ceiling when it has a capacity above 0 and no
    failing rate (``capacity_upper_qps`` missing), as such searches ended.  A frame with
    no ``capacity_kind`` column at all counts every row as measured.
    """
    kinds = pd.Series(CAPACITY_MEASURED, index=frame.index, dtype=object)
    if "capacity_kind" not in frame.columns:
        return kinds
    stored = frame["capacity_kind"]
    known = stored.notna().to_numpy(dtype=bool)
    kinds[known] = stored[known].astype(str)
    if {"capacity_qps", "capacity_upper_qps"} <= set(frame.columns):
        unbounded = (_floats(frame["capacity_qps"]) > 0) & np.isnan(
            _floats(frame["capacity_upper_qps"])
        )
        kinds[~known & unbounded] = CAPACITY_CEILING
    return kinds


def _on_ceiling(frame: pd.DataFrame) -> np.ndarray:
    return (capacity_kinds(frame) == CAPACITY_CEILING).to_numpy(dtype=bool)


def qualifying(frame: pd.DataFrame) -> np.ndarray:
    """Rows that could be recommended: they meet the SLOs on a measured capacity."""
    passed = frame["slo_passed"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    return passed & ~_on_ceiling(frame)


def job_frontier(frame: pd.DataFrame, frontier: Frontier) -> list[Hashable]:
    """A job's stored and plotted Pareto frontier: over the qualifying rows only, so the
    recommended configuration is on it, never below a point that misses the SLOs."""
    return pareto_front(frame[qualifying(frame)], frontier.maximize, frontier.minimize)


def rank_configurations(
    frame: pd.DataFrame,
    objective: str = "qps_per_dollar",
    passed_column: str = "slo_passed",
) -> pd.DataFrame:
    """The rows in recommendation order, with a 1-based ``rank`` column.

    SLO-passing rows first (a missing ``passed_column`` value counts as not passing), then
    measured capacities before ceiling ones (:func:`capacity_kinds`), then by ``objective``
    descending (missing values last), then fewer GPUs (``num_gpus``, if present),
    then the configuration ``label`` (if present), then ``configuration_id`` (if present). The
    result is a copy that keeps the original index labels; an existing ``rank`` column is
    replaced. Deterministic: shuffling the input rows gives the same order.
    """
    _require(frame, objective, passed_column)
    passed = frame[passed_column].astype("boolean").fillna(False).to_numpy(dtype=bool)
    keys: dict[str, object] = {
        "failed": ~passed,
        "ceiling": _on_ceiling(frame),
        "objective": -np.nan_to_num(_floats(frame[objective]), nan=-np.inf, posinf=np.inf),
    }
    if "num_gpus" in frame.columns:
        keys["gpus"] = np.nan_to_num(_floats(frame["num_gpus"]), nan=np.inf)
    if "label" in frame.columns:
        keys["label"] = ["" if pd.isna(v) else str(v) for v in frame["label"]]
    if "configuration_id" in frame.columns:
        ids = _floats(frame["configuration_id"])
        if np.isnan(ids).all() and frame["configuration_id"].notna().any():
            keys["id"] = [str(v) for v in frame["configuration_id"]]  # non-numeric ids
        else:
            keys["id"] = np.nan_to_num(ids, nan=np.inf)
    sort_keys = pd.DataFrame(keys)
    order = sort_keys.sort_values(list(keys), kind="stable").index.to_numpy()
    ranked = frame.iloc[order].copy()
    ranked["rank"] = np.arange(1, len(ranked) + 1, dtype=np.int64)
    return ranked


def best_configuration(
    frame: pd.DataFrame,
    objective: str = "qps_per_dollar",
    passed_column: str = "slo_passed",
) -> pd.Series | None:
    """The top of :func:`rank_configurations` among SLO-passing rows with a finite objective
    (with its ``rank``), or ``None`` when no row qualifies.

    The best measured configuration, whatever the QPS per dollar of configurations whose
    capacity rests on the analytic ceiling; one of those only when no measured configuration
    meets the SLOs (its ``capacity_kind`` says so).  :func:`ceiling_rival` names a ceiling
    configuration that would have been recommended on QPS per dollar alone.
    """
    _require(frame, objective, passed_column)
    if frame.empty:
        return None
    ranked = rank_configurations(frame, objective=objective, passed_column=passed_column)
    top = ranked.iloc[0]
    passed = top[passed_column]
    if pd.isna(passed) or not bool(passed):
        return None
    value = pd.to_numeric(pd.Series([top[objective]]), errors="coerce").iloc[0]
    if not np.isfinite(value):
        return None
    return top


def ceiling_rival(
    frame: pd.DataFrame,
    objective: str = "qps_per_dollar",
    passed_column: str = "slo_passed",
) -> pd.Series | None:
    """The SLO-passing configuration resting on the ceiling with the highest ``objective``,
    when that is above the recommended (:func:`best_configuration`) one's; else ``None``.

    It is not recommended (its capacity is an analytic bound, not a measurement), but a
    reader of the recommendation should know that it might serve more per dollar.
    """
    best = best_configuration(frame, objective, passed_column)
    ceiling = _on_ceiling(frame)
    if best is None or ceiling[frame.index.get_loc(best.name)]:
        return None  # nothing recommended, or the best itself rests on the ceiling
    passed = frame[passed_column].astype("boolean").fillna(False).to_numpy(dtype=bool)
    value = np.nan_to_num(_floats(frame[objective]), nan=-np.inf)
    rivals = np.flatnonzero(passed & ceiling & (value > float(best[objective])))
    if rivals.size == 0:
        return None
    ranked = rank_configurations(frame.iloc[rivals], objective, passed_column)
    return ranked.iloc[0]


def refinement_contenders(frame: pd.DataFrame, fine_tolerance: float) -> list[int]:
    """Configurations whose capacity bracket could still change the recommendation.

    A row's true capacity lies in [``capacity_qps``, ``capacity_upper_qps``) (no upper:
    unbounded).  The recommendation is the SLO-passing measured row of highest QPS per
    dollar (:func:`best_configuration`); the current best is at least ``floor`` = the
    largest ``qps_per_dollar`` among passing measured rows.  A row resting on the ceiling
    never contends: a finer search at the same length cannot measure it, and it is not
    recommended over a measured row.  A passing measured row not yet searched to
    ``fine_tolerance`` (``tolerance`` missing or coarser) contends while its optimistic
    QPS per dollar, ``upper / cost_per_hour``, exceeds the floor: refining it may raise it
    above the best, or
    (filters checked at a higher rate) make it fail.  A row failing its SLO filters at
    its capacity fails them at any higher rate too, so it never contends.  Returns the
    ``configuration_id`` of each contender, most promising first; empty when the
    recommendation is settled.
    """
    _require(
        frame, "configuration_id", "qps_per_dollar", "slo_passed", "capacity_upper_qps",
        "cost_per_hour", "tolerance",
    )  # fmt: skip
    if frame.empty:
        return []
    passed = frame["slo_passed"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    lower = np.nan_to_num(_floats(frame["qps_per_dollar"]), nan=-np.inf)
    candidate = passed & (lower > 0) & ~_on_ceiling(frame)
    if not candidate.any():
        return []
    floor = float(lower[candidate].max())
    upper_qps = np.nan_to_num(_floats(frame["capacity_upper_qps"]), nan=np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        upper = upper_qps / _floats(frame["cost_per_hour"])
    tolerance = np.nan_to_num(_floats(frame["tolerance"]), nan=np.inf)
    coarse = tolerance > fine_tolerance * (1 + 1e-9)
    contends = candidate & coarse & (upper > floor)
    order = np.argsort(-np.nan_to_num(upper, nan=-np.inf), kind="stable")
    ids = frame["configuration_id"].to_numpy()
    return [int(ids[i]) for i in order if contends[i]]
