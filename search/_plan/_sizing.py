"""Sizing a fleet from a search's results: replicas per forecast date, cost, runner-ups.

Every dollar figure is computed here from the catalog the plan runs with (its price, date
and source go into the report), not read from the stored results: the plan's figures then
follow the catalog in force whatever price a result was stored with.  Replicas are copies
of the recommended deployment unit, enough that the forecast peak is at most ``headroom`` of
their capacity.
"""

from __future__ import annotations

import datetime as dt
import math

import pandas as pd

from search._pareto import best_configuration, rank_configurations
from search._plan._spec import HOURS_PER_MONTH, FleetSpec, Service
from search._pool_space import gpu_cost_per_hour
from sku_catalog import Catalog

RUNNER_UPS = 3


def repriced(frame: pd.DataFrame, catalog: Catalog) -> pd.DataFrame:
    """The results priced with the catalog's current prices, in recommendation order."""
    frame = frame.copy()
    # each pool of a disaggregated deployment at its own SKU's price
    rows = zip(frame["params"], frame["sku"], frame["num_gpus"], strict=True)
    cost = pd.Series(
        [gpu_cost_per_hour({"sku": sku} | (p or {}), int(n), catalog) for p, sku, n in rows],
        index=frame.index, dtype=float,
    )  # fmt: skip
    tokens_per_hour = frame["throughput_tokens_per_s"].astype(float) * 3600
    frame["cost_per_hour"] = cost
    frame["qps_per_dollar"] = frame["capacity_qps"].astype(float) / cost
    frame["cost_per_million_output_tokens"] = (cost / tokens_per_hour * 1e6).where(
        tokens_per_hour > 0
    )
    return rank_configurations(frame) if len(frame) else frame


def replicas_for(qps: float, capacity_qps: float, headroom: float) -> int:
    """Copies of a unit of `capacity_qps` that serve `qps` at no more than `headroom`."""
    if capacity_qps <= 0:
        raise ValueError("a deployment with no capacity cannot be sized")
    return max(1, math.ceil(qps / (headroom * capacity_qps) - 1e-9))


def price_of(catalog: Catalog, sku: str) -> dict:
    s = catalog.get(sku)
    return {"sku": s.id, "price_per_gpu_hour": s.price_per_gpu_hour,
            "price_date": s.price_date, "price_source": s.price_source}  # fmt: skip


def unit(row: pd.Series) -> dict:
    """A deployment unit's headline figures (one row of the results)."""
    tokens = _float(row.get("throughput_tokens_per_s"))
    requests = _float(row.get("throughput_requests_per_s"))
    return {
        "deployment": str(row["label"]),
        "sku": str(row["sku"]),
        "gpus": int(row["num_gpus"]),
        "capacity_qps": float(row["capacity_qps"]),
        "capacity_kind": None if pd.isna(row.get("capacity_kind")) else str(row["capacity_kind"]),
        "cost_per_hour": float(row["cost_per_hour"]),
        "qps_per_dollar": float(row["qps_per_dollar"]),
        "cost_per_million_output_tokens": _float(row.get("cost_per_million_output_tokens")),
        "output_tokens_per_request": tokens / requests if tokens and requests else None,
        "ttft_p90_s": _float(row.get("ttft_p90")),
        "tbt_p99_s": _float(row.get("tbt_p99")),
    }


def fleet_at(best: dict, day: dt.date, qps: float, headroom: float) -> dict:
    """The fleet of the recommended unit for one forecast date."""
    n = replicas_for(qps, best["capacity_qps"], headroom)
    cost = n * best["cost_per_hour"]
    per_request = best["output_tokens_per_request"]
    per_million = cost / (qps * per_request * 3600) * 1e6 if per_request else None
    return {
        "date": day.isoformat(),
        "peak_qps": qps,
        "replicas": n,
        "gpus": n * best["gpus"],
        "cost_per_hour": cost,
        "cost_per_month": cost * HOURS_PER_MONTH,
        "utilization": qps / (n * best["capacity_qps"]),
        "cost_per_million_output_tokens": per_million,
    }


def size_service(service: Service, frame: pd.DataFrame, catalog: Catalog, headroom: float,
                 today: dt.date) -> dict:  # fmt: skip
    """Everything the report says about one service, as JSON-ready data."""
    forecast = service.demand.forecast(today)
    top = best_configuration(frame) if len(frame) else None
    out: dict = {
        "service": service.name,
        "model": service.search.model,
        "forecast": [{"date": d.isoformat(), "peak_qps": q} for d, q in forecast],
    }
    if top is None:
        return out | {"recommended": None, "fleet": [], "runner_ups": [], "daily": None,
                      "current_fleet": None}  # fmt: skip
    best = unit(top) | {"price": price_of(catalog, str(top["sku"]))}
    fleet = [fleet_at(best, d, q, headroom) for d, q in forecast]
    horizon_qps = forecast[-1][1]
    return out | {
        "recommended": best,
        "fleet": fleet,
        "runner_ups": _runner_ups(frame, top, fleet[-1], horizon_qps, headroom, catalog),
        "daily": _daily(service, best, headroom),
        "current_fleet": _current(service.current_fleet, frame, forecast, headroom),
    }


def _runner_ups(frame: pd.DataFrame, top: pd.Series, horizon: dict, qps: float,
                headroom: float, catalog: Catalog) -> list[dict]:  # fmt: skip
    passing = frame[frame["slo_passed"].astype("boolean").fillna(False)]
    rows = [r for _, r in passing.iterrows() if r["configuration_id"] != top["configuration_id"]]
    out = []
    for row in rows[:RUNNER_UPS]:
        other = unit(row) | {"price": price_of(catalog, str(row["sku"]))}
        n = replicas_for(qps, other["capacity_qps"], headroom)
        month = n * other["cost_per_hour"] * HOURS_PER_MONTH
        out.append(other | {"replicas_at_horizon": n, "cost_per_month_at_horizon": month,
                            "extra_cost_per_month": month - horizon["cost_per_month"]})  # fmt: skip
    return out


def _daily(service: Service, best: dict, headroom: float) -> dict | None:
    """Replicas hour by hour today, and scaling with the day against provisioning the peak."""
    hourly = service.demand.hourly_peaks()
    if hourly is None:
        return None
    replicas = [replicas_for(q, best["capacity_qps"], headroom) if q > 0 else 0 for q in hourly]
    scaled = sum(replicas) * best["cost_per_hour"]
    peak = 24 * max(replicas) * best["cost_per_hour"]
    return {"hourly_peak_qps": hourly, "hourly_replicas": replicas,
            "cost_per_day_scaled": scaled, "cost_per_day_at_peak": peak,
            "saving_per_month": (peak - scaled) * HOURS_PER_MONTH / 24}  # fmt: skip


def _current(fleet: FleetSpec | None, frame: pd.DataFrame, forecast: list, headroom: float,
             ) -> dict | None:  # fmt: skip
    """Whether the stated current fleet serves each forecast date."""
    if fleet is None:
        return None
    match = frame[frame["label"] == fleet.deployment]
    capacity = 0.0
    why = "it has no capacity result (failed, infeasible or not in the job)"
    if len(match):
        row = match.iloc[0]
        if bool(row["slo_passed"]) and _float(row["capacity_qps"]):
            capacity, why = float(row["capacity_qps"]), ""
        else:
            why = "it does not meet the SLOs at any rate probed"
    serves = fleet.replicas * capacity * headroom
    short = [{"date": d.isoformat(), "peak_qps": q, "replicas_needed":
              replicas_for(q, capacity, headroom) if capacity else None}
             for d, q in forecast if q > serves]  # fmt: skip
    return {"deployment": fleet.deployment, "replicas": fleet.replicas,
            "serves_qps": serves, "short_on": short, "why": why}  # fmt: skip


def _float(value: object) -> float | None:
    if value is None or value is pd.NA:
        return None
    value = float(value)
    return value if math.isfinite(value) else None
