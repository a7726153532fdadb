"""Reading a job's results for people: tables, the recommended deployment, plot input."""

from __future__ import annotations

import json
import math
from collections import Counter

import pandas as pd
from rich import box
from rich.console import Console
from rich.table import Table

from search._capacity_kind import CAPACITY_CEILING
from search._pareto import (
    best_configuration,
    capacity_kinds,
    ceiling_rival,
    rank_configurations,
)
from search._pool_space import AGGREGATED, DISAGGREGATED, dp_tp_text
from search._spec import SearchSpec, parse_spec


def pool_layout(params: dict) -> str:
    """aggregated or disaggregated, from a stored configuration's params (configurations
    stored before disaggregated pools have no ``decode`` entry: aggregated)."""
    return AGGREGATED if params.get("decode") is None else DISAGGREGATED


def pool_split(params: dict) -> str:
    """The pools as xPyD (prefill and decode replicas) with each pool's parallelism, e.g.
    ``2P1D TP4/TP8`` (``TP4xPP2`` for a pipelined prefill pool, ``DP8xTP1`` for attention
    DP), or ``aggregated``."""
    decode = params.get("decode")
    if decode is None:
        return AGGREGATED
    prefill = _pool_parallelism(params) + (
        f"xPP{params['pp']}" if params.get("pp", 1) > 1 else ""
    )
    return f"{params['replicas']}P{decode['replicas']}D {prefill}/{_pool_parallelism(decode)}"


def _pool_parallelism(pool: dict) -> str:
    """A pool's attention DP and TP as stored (``DP8xTP1``; ``TP4`` without DP)."""
    return dp_tp_text(pool.get("dp", 1), pool["tp"], "x")


def with_labels(frame: pd.DataFrame) -> pd.DataFrame:
    """The results with each configuration's ``label``, and ``capacity_kind`` filled in for
    rows stored before kinds were recorded (`search._pareto.capacity_kinds`)."""
    frame = frame.copy()
    frame["label"] = [
        (p or {}).get("label") or f"config {cid}"
        for p, cid in zip(frame["params"], frame["configuration_id"], strict=True)
    ]
    frame["layout"] = [pool_layout(p or {}) for p in frame["params"]]
    frame["pools"] = [pool_split(p or {}) for p in frame["params"]]
    if "capacity_kind" in frame.columns:
        has_result = frame["capacity_qps"].notna()
        frame["capacity_kind"] = capacity_kinds(frame).where(has_result, None)
    return frame


def job_spec(db, job_id: int | None) -> tuple[object, SearchSpec]:
    job = db.get_job(job_id)
    return job, parse_spec(json.loads(job.spec), source=f"job {job.id}'s spec")


def ranked_results(db, job_id: int | None, **filters) -> pd.DataFrame:
    frame = with_labels(db.results(job_id, status="done", **filters))
    return rank_configurations(frame) if len(frame) else frame


# result columns in seconds, and their names in exports (the unit in the name)
_LATENCY_PREFIXES = ("ttft_", "tbt_", "tpot_", "e2e_", "scheduling_delay_")


def export_frame(db, job_id: int | None, **filters) -> pd.DataFrame:
    """Every configuration of a job (all statuses) in recommendation order, the ones without
    a result last; latency columns renamed with their unit (``ttft_p90`` -> ``ttft_p90_s``)."""
    frame = rank_configurations(with_labels(db.results(job_id, **filters)))
    return frame.drop(columns="rank").rename(columns=_with_units).reset_index(drop=True)


def _fmt(value, scale: float = 1.0, digits: int = 1) -> str:
    if _missing(value):
        return "-"
    return f"{value * scale:,.{digits}f}"


def _missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _kind(row: dict) -> str:
    """The capacity's kind, with the requests it was decided on, e.g. ``measured 4000``."""
    kind = row.get("capacity_kind")
    if _missing(kind):
        return "-"
    requests = row.get("num_requests")
    return str(kind) if _missing(requests) else f"{kind} {int(requests)}"


def _rejected(row: dict) -> str:
    value = row.get("rejected_requests")
    return "-" if _missing(value) else str(int(value))


# (header, cell, right-aligned, shown only with --wide): the narrow set fits 80 columns
_RESULT_COLUMNS = (
    ("rank", lambda r: str(r.get("rank", "")), True, False),
    ("configuration", lambda r: r["label"], False, False),
    ("engine", lambda r: "vidur@2024" if _missing(r.get("engine")) else str(r["engine"]),
     False, True),
    ("pools", lambda r: r.get("pools", AGGREGATED), False, True),
    ("GPUs", lambda r: str(r["num_gpus"]), True, True),
    ("$/h", lambda r: _fmt(r["cost_per_hour"], digits=2), True, True),
    ("QPS", lambda r: _fmt(r["capacity_qps"], digits=2), True, True),
    ("capacity", _kind, False, True),
    ("rejected", _rejected, True, True),
    ("QPS/$", lambda r: _fmt(r["qps_per_dollar"], digits=3), True, False),
    ("TTFT P90 s", lambda r: _fmt(r["ttft_p90"], digits=2), True, False),
    ("TBT P99 ms", lambda r: _fmt(r["tbt_p99"], 1e3), True, False),
    ("$/M out tok", lambda r: _fmt(r["cost_per_million_output_tokens"], digits=2), True, True),
    ("SLOs", lambda r: "pass" if r["slo_passed"] is True else "FAIL", False, False),
)  # fmt: skip


def results_table(frame: pd.DataFrame, title: str, wide: bool = False) -> Table:
    """Ranked results as a table: numbers never shortened; the narrow set (rank,
    configuration, QPS/$, TTFT, TBT, SLOs) fits 80 columns, `wide` adds the rest."""
    columns = [c for c in _RESULT_COLUMNS if wide or not c[3]]
    rows = [[cell(row) for _, cell, _, _ in columns] for row in frame.to_dict("records")]
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for i, (header, _, right, _) in enumerate(columns):
        table.add_column(
            header, justify="right" if right else "left", no_wrap=right,
            min_width=max([len(header), *(len(r[i]) for r in rows)]) if right else None,
            overflow="fold",
        )  # fmt: skip
    for row in rows:
        table.add_row(*row)
    return table


def why_no_recommendation(db, job_id: int, spec: SearchSpec) -> str:
    """Why a job recommends nothing: its budget, feasibility, failures, or the SLOs."""
    counts = db.configuration_counts(job_id)
    total = sum(counts.values())
    if total == 0:
        from search._space import expand_space

        smallest = min((p.num_gpus for p in expand_space(spec)), default=0)
        limits = f"max_gpus {spec.budget.max_gpus}"
        if spec.budget.max_gpus_per_replica is not None:
            limits += f", max_gpus_per_replica {spec.budget.max_gpus_per_replica}"
        return (
            f"no configuration of the space fits the budget ({limits}; the smallest needs "
            f"{smallest} GPUs): raise budget.max_gpus or add smaller TP/PP/replica values."
        )
    if counts["infeasible"] == total:
        frame = db.results(job_id)
        kinds = Counter(str(r).split(":")[0] for r in frame["infeasible_reason"])
        listed = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
        return (
            f"all {total} configurations are infeasible ({listed}); "
            f"`llmcap search validate SPEC` shows why, e.g. {frame['infeasible_reason'].iloc[0]}"
        )
    if counts["done"] == 0:
        return (
            f"no configuration was evaluated ({counts['failed']} failed, {counts['pending']} "
            f"not yet run): see `llmcap results show {job_id}` for the errors, then run the "
            f"spec again."
        )
    head = (
        f"no configuration meets the SLOs "
        f"({', '.join(s.describe() for s in spec.slo.filters) or 'capacity only'}) among the "
        f"{counts['done']} evaluated"
    )
    failures = filter_failures(db.results(job_id, status="done"), spec)
    if not failures:
        return head + "."
    lines = [head + ":"]
    for slo, failed, closest in failures:
        lines.append(
            f"  {slo.describe()}: missed by {failed} of {counts['done']}; the closest reached "
            f"{closest:.3g} s ({closest / slo.max_s:.1f}x the bound)"
        )
    if not spec.slo.capacity_meets_filters:
        lines.append(
            f"  the filters are checked at each configuration's capacity "
            f"({spec.slo.capacity.describe()}), where queues are already long; with "
            "`slo: {capacity_meets_filters: true}` the capacity is the largest rate that meets "
            "every filter, so a deployment that can meet them at a lower rate qualifies."
        )
    return "\n".join(lines)


def filter_failures(frame: pd.DataFrame, spec: SearchSpec) -> list[tuple[object, int, float]]:
    """(filter, configurations that missed it, the closest value any of them reached) for each
    SLO filter some evaluated configuration missed, from the stored ``slo_detail``."""
    out = []
    for slo in spec.slo.filters:
        values = [
            detail[slo.column].get("value")
            for detail in frame["slo_detail"]
            if isinstance(detail, dict) and isinstance(detail.get(slo.column), dict)
            and detail[slo.column].get("passed") is False
        ]
        values = [float(v) for v in values if v is not None and not _missing(v)]
        if values:
            out.append((slo, len(values), min(values)))
    return out


def recommendation(db, job_id: int | None) -> dict:
    """The recommended deployment of a job as plain data (what `results best --json` prints).

    ``recommended`` is the best SLO-passing configuration (its export row: latencies in
    seconds) or None with ``why``; ``for_budget`` how many of its deployment units the GPU
    budget buys; ``not_recommended`` a better-looking rival resting on the analytic ceiling.
    """
    job, spec = job_spec(db, job_id)
    frame = ranked_results(db, job.id)
    best = best_configuration(frame) if len(frame) else None
    out: dict = {"job_id": job.id, "job_name": job.name, "model": spec.model}
    if best is None:
        return out | {"recommended": None, "why": why_no_recommendation(db, job.id, spec)}
    units = _budget_units(best, spec)
    rival = ceiling_rival(frame)
    return out | {
        "recommended": _json_row(best),
        "for_budget": {
            "units": units,
            "gpus": units * int(best["num_gpus"]),
            "max_gpus": spec.budget.max_gpus,
            "capacity_qps": float(best["capacity_qps"]) * units,
            "cost_per_hour": float(best["cost_per_hour"]) * units,
        },
        "not_recommended": None if rival is None else _json_row(rival),
    }


def _budget_units(best: pd.Series, spec: SearchSpec) -> int:
    """How many copies of the recommended deployment unit the GPU budget holds (at least 1)."""
    return max(1, spec.budget.max_gpus // int(best["num_gpus"]))


def _unit(best: pd.Series) -> str:
    """What one deployment unit is: its replicas, or its prefill and decode pools."""
    if best.get("layout") == DISAGGREGATED:
        return f"{best['pools']} pools"
    return f"{int(best['replicas'])} replica(s)"


def _json_row(row: pd.Series) -> dict:
    """One result row as JSON-ready data, latency columns named with their unit."""
    return json.loads(records_json(pd.DataFrame([row])))[0]


def records_json(frame: pd.DataFrame) -> str:
    """Rows as a JSON array of records, latency columns named with their unit."""
    return frame.rename(columns=_with_units).to_json(orient="records", date_format="iso")


def _with_units(col: str) -> str:
    latency = col.startswith(_LATENCY_PREFIXES) and not col.endswith("_s")
    return f"{col}_s" if latency else col


def print_best(db, job_id: int | None, console: Console) -> bool:
    """Print the recommended deployment of a job: the best SLO-passing configuration, for the
    budget; or why there is none.  Returns whether there is one."""
    job, spec = job_spec(db, job_id)
    frame = ranked_results(db, job.id)
    best = best_configuration(frame) if len(frame) else None
    if best is None:
        console.print(f"job {job.id}: {why_no_recommendation(db, job.id, spec)}")
        return False
    rival = ceiling_rival(frame)
    replicas = _budget_units(best, spec)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("Recommended", f"{best['label']}  ({spec.model})")
    grid.add_row(
        "For the budget",
        f"{replicas} x {_unit(best)} = {replicas * int(best['num_gpus'])} "
        f"of {spec.budget.max_gpus} GPUs, capacity {best['capacity_qps'] * replicas:,.2f} QPS, "
        f"${best['cost_per_hour'] * replicas:,.2f}/h",
    )
    grid.add_row(
        "Per deployment unit",
        f"{int(best['num_gpus'])} GPUs, capacity {best['capacity_qps']:,.2f} QPS, "
        f"{best['qps_per_dollar']:.3f} QPS per $/h, "
        f"${best['cost_per_million_output_tokens']:,.2f} per million output tokens",
    )
    grid.add_row(
        "Latency at capacity",
        f"TTFT P50/P90/P99 {_fmt(best['ttft_p50'], 1e3)} / {_fmt(best['ttft_p90'], 1e3)} / "
        f"{_fmt(best['ttft_p99'], 1e3)} ms;  TBT P50/P99 {_fmt(best['tbt_p50'], 1e3)} / "
        f"{_fmt(best['tbt_p99'], 1e3)} ms;  E2E P90 {_fmt(best['e2e_p90'], 1, 2)} s",
    )
    grid.add_row("Capacity", _capacity_line(best, spec.slo.max_rejected_share))
    grid.add_row(
        "SLOs",
        ", ".join(s.describe() for s in [spec.slo.capacity, *spec.slo.filters]) + ": all met",
    )
    if rival is not None:
        grid.add_row(
            "Not recommended",
            f"{rival['label']}: {rival['qps_per_dollar']:.3f} QPS per $/h, but its capacity "
            f"({rival['capacity_qps']:,.2f} QPS) rests on the analytic ceiling, not a "
            "measurement: even its longest workload did not load it (raise "
            "capacity.max_requests to measure it)",
        )
    console.print(grid)
    return True


def _capacity_line(best: pd.Series, max_rejected_share: float) -> str:
    """How the recommended capacity was found (measured, or resting on the ceiling), on how
    many requests, and how many of them the deployment refused."""
    requests = best.get("num_requests")
    on = "" if _missing(requests) else f" on {int(requests):,} requests"
    rejected = best.get("rejected_requests")
    refused = (
        ""
        if _missing(rejected) or not rejected
        else f"; {int(rejected):,} of them rejected (slo.max_rejected_share {max_rejected_share:g})"
    )
    if best.get("capacity_kind") == CAPACITY_CEILING:
        return (
            f"[yellow]rests on the analytic ceiling, not a measurement[/yellow]: it met the SLOs "
            f"at every rate probed{on}, and no configuration with a measured capacity meets "
            f"them{refused}"
        )
    return f"measured{on}{refused}"
