"""Capacity planning: plans of services with demand forecasts, run on a schedule.

`load_plan` reads and checks a plan; `run_plan` runs each service's search (reusing results
by fingerprint) and sizes the fleets; `compare` says what changed since the previous run;
`write_report` writes report.md, report.json and report.html.
"""

from __future__ import annotations

from search._plan._compare import compare
from search._plan._report import write_report
from search._plan._run import SearchCounts, check_plan, run_plan
from search._plan._spec import HOURS_PER_MONTH, Plan, Service, load_plan

__all__ = [
    "HOURS_PER_MONTH",
    "Plan",
    "SearchCounts",
    "Service",
    "check_plan",
    "compare",
    "load_plan",
    "run_plan",
    "write_report",
]
