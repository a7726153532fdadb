"""What changed between two runs of a plan, and what needs acting on.

A change is data: ``{"kind", "service", "message"}``.  Kinds: ``deployment`` (the
recommendation changed), ``qps_per_dollar`` and ``fleet_cost`` (moved beyond the plan's
thresholds), ``slo`` (a service no longer meets its SLOs), ``price`` (a price the plan uses
changed), ``workload`` (a service's search inputs changed), and the standing conditions
``current_fleet`` (a forecast date the stated fleet cannot serve) and ``no_recommendation``.
Any change means exit status 3.
"""

from __future__ import annotations

from search._plan._spec import AlertSpec


def compare(previous: dict | None, current: dict, alerts: AlertSpec) -> list[dict]:
    """The changes of `current` against `previous` (both run summaries), then the standing
    conditions of `current`."""
    changes: list[dict] = []
    before = {s["service"]: s for s in (previous or {}).get("services", [])}
    for service in current["services"]:
        name = service["service"]
        old = before.get(name)
        if old is not None:
            changes += _against(name, old, service, alerts)
        changes += _standing(name, service, old)
    return changes


def _change(kind: str, service: str, message: str) -> dict:
    return {"kind": kind, "service": service, "message": message}


def _against(name: str, old: dict, new: dict, alerts: AlertSpec) -> list[dict]:
    out = []
    for sku, price in new.get("prices", {}).items():
        was = old.get("prices", {}).get(sku)
        if was is not None and was["price_per_gpu_hour"] != price["price_per_gpu_hour"]:
            out.append(_change("price", name, (
                f"{sku} price ${was['price_per_gpu_hour']:.4g}/GPU-h ({was['price_date']}, "
                f"{was['price_source']}) -> ${price['price_per_gpu_hour']:.4g}/GPU-h "
                f"({price['price_date']}, {price['price_source']})"
            )))  # fmt: skip
    if old.get("spec_fingerprint") != new.get("spec_fingerprint"):
        out.append(_change("workload", name, (
            f"the search inputs changed (spec fingerprint {str(old.get('spec_fingerprint'))[:12]}"
            f" -> {str(new.get('spec_fingerprint'))[:12]}: model, workload, SLOs or engine)"
        )))  # fmt: skip
    was, now = old.get("recommended"), new.get("recommended")
    if was is not None and now is None:
        out.append(_change("slo", name, (
            f"no deployment meets the SLOs any more (was {was['deployment']})"
        )))  # fmt: skip
    if was is None or now is None:
        return out
    if was["deployment"] != now["deployment"]:
        out.append(_change("deployment", name, (
            f"recommended deployment {was['deployment']} -> {now['deployment']}"
        )))  # fmt: skip
    moved = _relative(was["qps_per_dollar"], now["qps_per_dollar"])
    if abs(moved) > alerts.qps_per_dollar_change:
        out.append(_change("qps_per_dollar", name, (
            f"QPS per $/h {was['qps_per_dollar']:.3f} -> {now['qps_per_dollar']:.3f} "
            f"({moved:+.1%}, threshold {alerts.qps_per_dollar_change:.0%})"
        )))  # fmt: skip
    cost_was, cost_now = old["fleet"][-1]["cost_per_month"], new["fleet"][-1]["cost_per_month"]
    moved = _relative(cost_was, cost_now)
    if abs(moved) > alerts.fleet_cost_change:
        out.append(_change("fleet_cost", name, (
            f"fleet cost at the horizon ({new['fleet'][-1]['date']}) ${cost_was:,.0f}/month -> "
            f"${cost_now:,.0f}/month ({moved:+.1%}, threshold {alerts.fleet_cost_change:.0%})"
        )))  # fmt: skip
    return out


def _standing(name: str, new: dict, old: dict | None) -> list[dict]:
    out = []
    if new.get("recommended") is None and (old is None or old.get("recommended") is None):
        out.append(_change("no_recommendation", name, (
            f"no deployment meets the SLOs: {new.get('why') or 'see the search results'}"
        )))  # fmt: skip
    fleet = new.get("current_fleet")
    if fleet and fleet["short_on"]:
        first = fleet["short_on"][0]
        needed = first["replicas_needed"]
        out.append(_change("current_fleet", name, (
            f"the current fleet ({fleet['replicas']} x {fleet['deployment']}, "
            f"{fleet['serves_qps']:.2f} QPS within headroom) cannot serve {first['date']}'s "
            f"peak {first['peak_qps']:.2f} QPS"
            + (f" (needs {needed} replicas)" if needed else f": {fleet['why']}")
            + (f", nor {len(fleet['short_on']) - 1} later date(s)"
               if len(fleet["short_on"]) > 1 else "")
        )))  # fmt: skip
    return out


def _relative(before: float, after: float) -> float:
    return (after - before) / before if before else (0.0 if after == before else float("inf"))
