"""Running a plan: each service's search (results reused by fingerprint), then the sizing.

`check_plan` is everything that can be refused before the database is touched; `run_plan`
runs the searches through the search driver and returns the run's summary (JSON-ready).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import pandas as pd

from search._db import Database
from search._driver import SearchDriver
from search._errors import SpecError
from search._executors import ExecutorKind
from search._plan._sizing import price_of, repriced, size_service
from search._plan._spec import HOURS_PER_MONTH, Plan, Service
from search._results_view import ranked_results, why_no_recommendation
from search._space import candidates


@dataclass(slots=True)
class SearchCounts:
    """What the searches of a run did: configurations simulated now and reused."""

    evaluated: int = 0
    refined: int = 0
    simulations: int = 0
    reused: int = 0
    per_service: dict[str, dict] = field(default_factory=dict)


def check_plan(plan: Plan) -> None:
    """Refuse what the searches would refuse, and a current fleet outside the space."""
    for service in plan.services:
        cands = candidates(service.search)
        if not any(c.feasible for c in cands):
            raise SpecError(
                f"plan {plan.path}: services.{service.name}: none of its {len(cands)} "
                "configurations can run; `llmcap search validate` on its search fields says why"
            )
        fleet = service.current_fleet
        if fleet is not None:
            labels = [c.point.label() for c in cands if c.feasible]
            if fleet.deployment not in labels:
                shown = "; ".join(labels[:6]) + ("; ..." if len(labels) > 6 else "")
                raise SpecError(
                    f"plan {plan.path}: services.{service.name}.current_fleet.deployment: "
                    f"{fleet.deployment!r} is not a feasible configuration of the service's "
                    f"space; allowed: {shown}"
                )


def run_plan(
    plan: Plan,
    db: Database,
    executor: ExecutorKind = "local",
    address: str | None = None,
    workers: int | None = None,
    today: dt.date | None = None,
) -> tuple[dict, SearchCounts, dict[str, pd.DataFrame]]:
    """Run (or reuse) every service's search and size its fleet: the run's summary, what
    the searches did, and each service's results priced as the plan prices them."""
    today = today or dt.datetime.now(dt.UTC).date()
    counts = SearchCounts()
    services = []
    frames: dict[str, pd.DataFrame] = {}
    for service in plan.services:
        driver = SearchDriver(service.search, db, executor, address, workers)
        report = driver.run()
        counts.evaluated += report.evaluated
        counts.refined += report.refined
        counts.simulations += report.simulations
        counts.reused += report.cached
        counts.per_service[service.name] = {
            "job_id": report.job_id, "evaluated": report.evaluated, "refined": report.refined,
            "simulations": report.simulations, "reused": report.cached,
        }  # fmt: skip
        frames[service.name] = _results(service, db, report.job_id)
        services.append(
            _service_summary(service, frames[service.name], db, report.job_id, plan.headroom, today)
        )
    summary = {
        "plan": plan.name,
        "date": today.isoformat(),
        "run_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "headroom": plan.headroom,
        "hours_per_month": HOURS_PER_MONTH,
        "catalog_files": [str(p) for p in plan.catalog],
        "services": services,
        "totals": _totals(services),
    }
    return summary, counts, frames


def _results(service: Service, db: Database, job_id: int) -> pd.DataFrame:
    frame = ranked_results(db, job_id)
    return repriced(frame, service.search.sku_catalog) if len(frame) else frame


def _service_summary(service: Service, frame: pd.DataFrame, db: Database, job_id: int,
                     headroom: float, today: dt.date) -> dict:  # fmt: skip
    catalog = service.search.sku_catalog
    sized = size_service(service, frame, catalog, headroom, today)
    if sized["recommended"] is None:
        sized["why"] = why_no_recommendation(db, job_id, service.search)
    points = [] if not len(frame) else [
        {"deployment": str(r["label"]), "sku": str(r["sku"]), "gpus": int(r["num_gpus"]),
         "capacity_qps": _finite(r["capacity_qps"]), "qps_per_dollar": _finite(r["qps_per_dollar"]),
         "ttft_p90_s": _finite(r["ttft_p90"]), "slo_passed": bool(r["slo_passed"])}
        for _, r in frame.iterrows()
    ]  # fmt: skip
    return sized | {
        "job_id": job_id,
        "spec_fingerprint": service.search.fingerprint(),
        "prices": {sku: price_of(catalog, sku) for sku in service.search.skus},
        "results": points,
    }


def _totals(services: list[dict]) -> dict:
    sized = [s for s in services if s["fleet"]]
    return {
        "cost_per_month_now": sum(s["fleet"][0]["cost_per_month"] for s in sized),
        "cost_per_month_at_horizon": sum(s["fleet"][-1]["cost_per_month"] for s in sized),
        "gpus_now": sum(s["fleet"][0]["gpus"] for s in sized),
        "gpus_at_horizon": sum(s["fleet"][-1]["gpus"] for s in sized),
    }


def _finite(value: object) -> float | None:
    try:
        value = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return value if value == value and abs(value) != float("inf") else None
