"""A capacity plan: services (a search each) with their demand forecast, read from YAML.

A plan names its services; each is a search (the fields of a search spec inline, or
``spec: path``) plus its demand (peak QPS now, then dated points or a monthly growth rate,
optionally 24 hourly shares of a day) and optionally the fleet running it today.  Every error
names the plan file and the field, and is raised before anything is simulated or written.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from search._errors import SpecError
from search._spec import SearchSpec, load_spec, parse_spec
from sku_catalog import YamlInputError, read_yaml_file
from sku_catalog._yaml import shorten

HOURS_PER_MONTH = 730.0  # 8,760 hours a year / 12: what every $/month figure uses
_PLAN_FIELDS = ("demand", "current_fleet", "spec")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TraceProfile(_Strict):
    """A daily profile read from a trace's own arrival times (at least one day of them)."""

    trace: str = Field(description="The trace file whose arrivals give the hourly shares.")
    format: str = Field("auto", description="The trace's format (as workload.trace_format).")
    columns: dict[str, str] | None = Field(
        None, description="For a csv trace: its arrival, prompt and output columns."
    )
    start_hour: int = Field(
        0, ge=0, le=23, description="UTC hour of the trace's first request."
    )


class DemandSpec(_Strict):
    """The traffic a service must serve: its peak now and how it grows."""

    peak_qps: float = Field(gt=0, description="Peak arrival rate now (requests/s).")
    points: dict[dt.date, float] | None = Field(
        None, description="Forecast peaks by date (`2027-03-01: 40`), dates increasing."
    )
    monthly_growth: float | None = Field(
        None, gt=-1.0, description="Peak growth per month (0.05 = +5 %); instead of points."
    )
    horizon_months: int = Field(
        12, ge=1, le=120, description="Months forecast with monthly_growth (one date a month)."
    )
    must_grow: bool = Field(
        True, description="Refuse a forecast whose peak ever falls (a typo, usually)."
    )
    daily_profile: list[float] | TraceProfile | None = Field(
        None, description="24 hourly shares of the day's traffic (UTC hours 0-23), or "
        "{trace: FILE} to take them from a trace's own arrival times; the peak hour serves "
        "peak_qps.",
    )  # fmt: skip

    @field_validator("points")
    @classmethod
    def _positive_points(cls, points: dict[dt.date, float] | None) -> dict | None:
        if points is None:
            return None
        if not points:
            raise ValueError("give at least one date: peak QPS, or leave points out")
        bad = [f"{day}: {qps}" for day, qps in points.items() if not qps > 0]
        if bad:
            raise ValueError(f"every forecast peak must be > 0 QPS; got {', '.join(bad)}")
        days = list(points)
        if days != sorted(days) or len(set(days)) != len(days):
            raise ValueError("dates must be listed in increasing order")
        return points

    @field_validator("daily_profile")
    @classmethod
    def _day_of_shares(
        cls, shares: list[float] | TraceProfile | None, info: ValidationInfo
    ) -> list[float] | None:
        if shares is None:
            return None
        if isinstance(shares, TraceProfile):
            from workloads import hourly_shares, read_trace

            base = (info.context or {}).get("base")  # the plan file's folder
            file = _relative(base, Path(shares.trace)) if base else Path(shares.trace)
            trace = read_trace(file, shares.format, columns=shares.columns)  # names the file
            if trace.arrival_times is None:
                raise ValueError(f"trace {shares.trace} has no arrival times")
            try:
                return hourly_shares(trace.arrival_times, shares.start_hour)
            except ValueError as exc:
                raise ValueError(f"trace {shares.trace}: {exc}") from None
        if len(shares) != 24:
            raise ValueError(f"give 24 hourly shares (hours 0-23); got {len(shares)}")
        if any(s < 0 for s in shares) or max(shares) <= 0:
            raise ValueError("shares must be >= 0 with at least one > 0")
        return shares

    @model_validator(mode="after")
    def _one_forecast(self) -> DemandSpec:
        if self.points is not None and self.monthly_growth is not None:
            raise ValueError("give points or monthly_growth, not both")
        if self.must_grow:
            if self.monthly_growth is not None and self.monthly_growth < 0:
                raise ValueError(
                    f"monthly_growth {self.monthly_growth} is negative while must_grow is true "
                    "(set must_grow: false for a shrinking forecast)"
                )
            peaks = [self.peak_qps, *(self.points or {}).values()]
            falls = [f"{a:g} -> {b:g}" for a, b in itertools.pairwise(peaks) if b < a]
            if falls:
                raise ValueError(
                    f"points: the peak falls ({', '.join(falls)}) while must_grow is true "
                    "(set must_grow: false if it really shrinks)"
                )
        return self

    def forecast(self, today: dt.date) -> list[tuple[dt.date, float]]:
        """(date, peak QPS): today's peak, then the dated points or one date a month."""
        out = [(today, self.peak_qps)]
        if self.points is not None:
            out += [(day, qps) for day, qps in self.points.items() if day > today]
        elif self.monthly_growth is not None:
            for month in range(1, self.horizon_months + 1):
                day = _add_months(today.replace(day=1), month)
                out.append((day, self.peak_qps * (1 + self.monthly_growth) ** month))
        return out

    def hourly_peaks(self) -> list[float] | None:
        """Peak QPS of each hour of the day now, the busiest hour at peak_qps."""
        if self.daily_profile is None:
            return None
        top = max(self.daily_profile)
        return [self.peak_qps * share / top for share in self.daily_profile]


class FleetSpec(_Strict):
    """The fleet serving a service today: replicas of one deployment of its space."""

    deployment: str = Field(
        description="A configuration label of the service's space, as the report prints it "
        "(e.g. 'a100-80gb TP1 PP1 sarathi b64 c512')."
    )
    replicas: int = Field(ge=1, description="Copies of that deployment running today.")


class AlertSpec(_Strict):
    """When a run's change against the previous run is worth an alert (exit status 3)."""

    qps_per_dollar_change: float = Field(
        0.05, ge=0, description="Relative move of the recommended QPS per $/h."
    )
    fleet_cost_change: float = Field(
        0.05, ge=0, description="Relative move of the fleet's $/month at the horizon."
    )


class ServiceEntry(_Strict):
    """The plan-only fields of a service; the rest of it is the search spec."""

    demand: DemandSpec
    current_fleet: FleetSpec | None = None
    spec: Path | None = None


class PlanFile(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=100)
    headroom: float = Field(0.85, gt=0, le=1, description="Most of its capacity a fleet runs at.")
    catalog: list[Path] = Field(default_factory=list, description="SKU catalog override files.")
    alerts: AlertSpec = Field(default_factory=AlertSpec)
    services: dict[str, dict[str, Any]] = Field(min_length=1)


@dataclass(slots=True)
class Service:
    name: str
    search: SearchSpec
    demand: DemandSpec
    current_fleet: FleetSpec | None


@dataclass(slots=True)
class Plan:
    name: str
    path: Path
    headroom: float
    alerts: AlertSpec
    catalog: list[Path]  # override files: the plan's, then the command line's
    services: list[Service]
    fingerprint: str  # sha256 of the plan file and the catalog files


def load_plan(path: str | Path, extra_catalog: list[Path] | tuple[Path, ...] = ()) -> Plan:
    """Read and validate a plan; every problem names the file and the field."""
    path = Path(path)
    shown = shorten(path)
    try:
        data = read_yaml_file(path, "plan file")
    except YamlInputError as exc:
        raise SpecError(str(exc)) from None
    if not isinstance(data, dict):
        raise SpecError(f"plan file {shown} must hold a mapping (name:, services: ...)")
    try:
        plan = PlanFile.model_validate(data)
    except ValidationError as exc:
        from search._errors import format_validation_error

        raise SpecError(format_validation_error(exc, f"plan {shown}", PlanFile)) from None
    base = path.resolve().parent
    catalog = [_relative(base, p) for p in plan.catalog] + [Path(p) for p in extra_catalog]
    for i, file in enumerate(catalog):
        if not file.is_file():
            where = f"catalog.{i}" if i < len(plan.catalog) else "--catalog"
            raise SpecError(f"plan {shown}: {where}: no catalog file {shorten(file)}")
    services = [
        _service(name, raw, plan.name, base, catalog, shown)
        for name, raw in plan.services.items()
    ]
    digest = hashlib.sha256(path.read_bytes())
    for file in catalog:
        digest.update(file.read_bytes())
    return Plan(plan.name, path, plan.headroom, plan.alerts, catalog, services, digest.hexdigest())


def _service(
    name: str, raw: object, plan: str, base: Path, catalog: list[Path], shown: str
) -> Service:
    where = f"plan {shown}: services.{name}"
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: must be a mapping (model:, skus:, demand: ... or spec:)")
    try:
        entry = ServiceEntry.model_validate(
            {k: raw[k] for k in _PLAN_FIELDS if k in raw}, context={"base": base}
        )
    except ValidationError as exc:
        from search._errors import format_validation_error

        raise SpecError(format_validation_error(exc, where, ServiceEntry)) from None
    inline = {k: v for k, v in raw.items() if k not in _PLAN_FIELDS}
    if entry.spec is not None:
        if inline:
            raise SpecError(
                f"{where}: spec: {entry.spec} is given, so the search fields "
                f"({', '.join(sorted(inline))}) belong in that file, not here"
            )
        spec_path = _relative(base, entry.spec)
        if not spec_path.is_file():
            raise SpecError(f"{where}.spec: no spec file {shorten(spec_path)}")
        search = load_spec(spec_path)
    else:
        inline.setdefault("name", f"{plan}-{name}")
        search = parse_spec(inline, source=f"{where} (its search fields)")
    if catalog:
        names = [*search.catalog, *(str(p) for p in catalog)]
        search = parse_spec(search.model_dump(mode="json") | {"catalog": names}, where)
    return Service(name, search, entry.demand, entry.current_fleet)


def _relative(base: Path, path: Path) -> Path:
    return path if path.is_absolute() else base / path


def _add_months(day: dt.date, months: int) -> dt.date:
    index = day.year * 12 + day.month - 1 + months
    return dt.date(index // 12, index % 12 + 1, 1)
