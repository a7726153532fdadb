"""The plan report's own plots, as inline SVG text: fleet cost over the forecast, replicas
over the day, capacity against GPUs per SKU.  Okabe-Ito colours (told apart under the
common colour-vision deficiencies) and a marker per series, so no plot relies on colour."""

from __future__ import annotations

import datetime as dt
import io
from typing import Any

OKABE_ITO = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def _figure(width: float = 7.0, height: float = 3.6) -> tuple[Any, Any]:
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasSVG(fig)
    ax = fig.subplots()
    ax.set_axisbelow(True)
    ax.grid(True, color="#dddddd", linewidth=0.6)
    return fig, ax


def _svg(fig: Any) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog: it is inlined in HTML


def _style(i: int) -> dict:
    return {"color": OKABE_ITO[i % len(OKABE_ITO)], "marker": MARKERS[i % len(MARKERS)]}


def fleet_cost_svg(services: list[dict]) -> str | None:
    """$/month of each service's fleet at each forecast date, and their total."""
    sized = [s for s in services if s["fleet"]]
    if not sized:
        return None
    fig, ax = _figure()
    series = []
    for i, service in enumerate(sized):
        days = [dt.date.fromisoformat(f["date"]) for f in service["fleet"]]
        costs = [f["cost_per_month"] for f in service["fleet"]]
        ax.step(days, costs, where="post", label=service["service"], **_style(i))
        series.append(list(zip(days, costs, strict=True)))
    if len(sized) > 1:  # each service's fleet holds until its next forecast date
        days = sorted({day for points in series for day, _ in points})
        totals = [sum(next((c for d, c in reversed(points) if d <= day), 0.0)
                      for points in series) for day in days]  # fmt: skip
        ax.step(days, totals, where="post", label="total", linestyle="--",
                **_style(len(sized)))  # fmt: skip
    ax.set_ylabel("fleet cost, $/month")
    ax.set_xlabel("forecast date")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left")
    fig.autofmt_xdate()
    return _svg(fig)


def daily_replicas_svg(services: list[dict]) -> str | None:
    """Replicas needed hour by hour, for services with a daily profile."""
    daily = [s for s in services if s.get("daily")]
    if not daily:
        return None
    fig, ax = _figure()
    for i, service in enumerate(daily):
        replicas = service["daily"]["hourly_replicas"]
        ax.step(range(25), [*replicas, replicas[-1]], where="post",
                label=f"{service['service']} (peak {max(replicas)})", **_style(i))  # fmt: skip
    ax.set_xlim(0, 24)
    ax.set_xticks(range(0, 25, 3))
    ax.set_xlabel("hour of day (UTC)")
    ax.set_ylabel("replicas needed")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left")
    return _svg(fig)


def capacity_svg(service: dict) -> str | None:
    """Capacity against GPUs of every SLO-passing configuration, one series per SKU."""
    points = [p for p in service["results"] if p["slo_passed"] and p["capacity_qps"]]
    if not points:
        return None
    fig, ax = _figure(6.0, 3.4)
    for i, sku in enumerate(sorted({p["sku"] for p in points})):
        mine = [p for p in points if p["sku"] == sku]
        style = _style(i)
        ax.scatter([p["gpus"] for p in mine], [p["capacity_qps"] for p in mine], label=sku,
                   color=style["color"], marker=style["marker"])  # fmt: skip
    ax.set_xlabel("GPUs per deployment unit")
    ax.set_ylabel("capacity, QPS")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left")
    return _svg(fig)
