"""The report of a plan run, in `DIR/<plan>/<date>/`: report.md, report.json, report.html.

The content is built once as blocks (headings, paragraphs, tables, plots) and rendered to
Markdown and to a self-contained HTML page (plots inline as SVG, no network).  Everything is
written into a temporary folder beside the target, which is renamed into place at the end:
a failed run leaves no half-written report.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from search._plan._plots import capacity_svg, daily_replicas_svg, fleet_cost_svg


@dataclass(slots=True)
class Block:
    kind: str  # h1 | h2 | h3 | p | list | table | plot
    text: str = ""
    rows: list[list[str]] | None = None  # table: header first; list: one item per row
    svg: str | None = None


def _money(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"${value:,.{digits}f}"


def _price(price: dict) -> str:
    return (f"{price['sku']} at ${price['price_per_gpu_hour']:.4g}/GPU-h "
            f"({price['price_source']}, {price['price_date']})")  # fmt: skip


def document(
    summary: dict, changes: list[dict], counts: dict, pareto: dict[str, str]
) -> list[Block]:
    """The report's content; `pareto` maps a service to its Pareto plot (SVG text)."""
    blocks = [Block("h1", f"Capacity plan {summary['plan']}, {summary['date']}")]
    totals = summary["totals"]
    blocks.append(Block("p", (
        f"Fleet now: {totals['gpus_now']} GPUs, {_money(totals['cost_per_month_now'])}/month; "
        f"at the horizon: {totals['gpus_at_horizon']} GPUs, "
        f"{_money(totals['cost_per_month_at_horizon'])}/month.  Forecast peaks are served at "
        f"no more than {summary['headroom']:.0%} of capacity; a month is "
        f"{summary['hours_per_month']:g} hours.  Searches: {counts['evaluated']} configurations "
        f"simulated ({counts['simulations']} simulations), {counts['reused']} reused."
    )))  # fmt: skip
    blocks.append(Block("h2", "What changed" if changes else "Nothing to act on"))
    if changes:
        blocks.append(Block("list", rows=[[f"{c['service']}: {c['message']}"] for c in changes]))
    else:
        blocks.append(Block("p", "No change crossed a threshold since the previous run."))
    plots = [("Fleet cost over the forecast", fleet_cost_svg(summary["services"])),
             ("Replicas over the day", daily_replicas_svg(summary["services"]))]  # fmt: skip
    for title, svg in plots:
        if svg:
            blocks.append(Block("plot", title, svg=svg))
    for service in summary["services"]:
        blocks += _service_blocks(service, pareto.get(service["service"]))
    return blocks


def _service_blocks(service: dict, pareto_svg: str | None) -> list[Block]:
    name = service["service"]
    out = [Block("h2", f"Service {name} ({service['model']})")]
    best = service["recommended"]
    if best is None:
        return [*out, Block("p", f"No recommendation: {service.get('why', '')}")]
    out.append(Block("p", (
        f"Recommended: {best['deployment']}: a unit of {best['gpus']} GPU(s), capacity "
        f"{best['capacity_qps']:.2f} QPS ({best['capacity_kind'] or 'measured'}), "
        f"{best['qps_per_dollar']:.3f} QPS per $/h, {_money(best['cost_per_hour'], 2)}/h a unit, "
        f"{_money(best['cost_per_million_output_tokens'], 2)} per million output tokens at "
        f"capacity.  Price used: {_price(best['price'])}.  Search job {service['job_id']}."
    )))  # fmt: skip
    rows = [["date", "peak QPS", "replicas", "GPUs", "$/h", "$/month", "utilization",
             "$/M out tok"]]  # fmt: skip
    for f in service["fleet"]:
        rows.append([f["date"], f"{f['peak_qps']:.2f}", str(f["replicas"]), str(f["gpus"]),
                     _money(f["cost_per_hour"], 2), _money(f["cost_per_month"]),
                     f"{f['utilization']:.0%}",
                     _money(f["cost_per_million_output_tokens"], 2)])  # fmt: skip
    out += [Block("h3", "Fleet per forecast date"), Block("table", rows=rows)]
    if service["runner_ups"]:
        rows = [["deployment", "QPS per $/h", "replicas at horizon", "$/month at horizon",
                 "extra $/month", "price"]]  # fmt: skip
        for r in service["runner_ups"]:
            rows.append([r["deployment"], f"{r['qps_per_dollar']:.3f}",
                         str(r["replicas_at_horizon"]), _money(r["cost_per_month_at_horizon"]),
                         _money(r["extra_cost_per_month"]), _price(r["price"])])  # fmt: skip
        out += [Block("h3", "Runner-ups"), Block("table", rows=rows), Block("p", (
            "Extra $/month: the runner-up's fleet at the horizon against the pick's; below "
            "zero where whole replicas make it cheaper at that demand."
        ))]  # fmt: skip
    daily = service["daily"]
    if daily:
        out += [Block("h3", "Over the day"), Block("p", (
            f"Scaling with the day: {_money(daily['cost_per_day_scaled'])}/day; provisioning "
            f"for the peak: {_money(daily['cost_per_day_at_peak'])}/day; scaling saves "
            f"{_money(daily['saving_per_month'])}/month.  Replicas by hour (UTC): "
            + " ".join(str(n) for n in daily["hourly_replicas"]) + "."
        ))]  # fmt: skip
    fleet = service["current_fleet"]
    if fleet:
        verdict = ("serves every forecast date" if not fleet["short_on"] else
                   "cannot serve " + ", ".join(s["date"] for s in fleet["short_on"]))  # fmt: skip
        out.append(Block("p", (
            f"Current fleet: {fleet['replicas']} x {fleet['deployment']} serves "
            f"{fleet['serves_qps']:.2f} QPS within headroom: {verdict}."
        )))  # fmt: skip
    if pareto_svg:
        out.append(Block("plot", f"{name}: QPS per $/h against latency (the pick ringed)",
                         svg=pareto_svg))  # fmt: skip
    capacity = capacity_svg(service)
    if capacity:
        out.append(Block("plot", f"{name}: capacity against GPUs per SKU", svg=capacity))
    return out


def markdown(blocks: list[Block]) -> str:
    lines: list[str] = []
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            lines += ["#" * int(b.kind[1]) + " " + b.text, ""]
        elif b.kind == "p":
            lines += [b.text, ""]
        elif b.kind == "list":
            lines += [f"- {row[0]}" for row in b.rows or []] + [""]
        elif b.kind == "table":
            header, *body = b.rows or [[]]
            lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            lines += ["| " + " | ".join(row) + " |" for row in body] + [""]
        elif b.kind == "plot":
            lines += [f"*Plot: {b.text} (in report.html)*", ""]
    return "\n".join(lines)


_STYLE = """
body{font:16px/1.45 system-ui,sans-serif;margin:0 auto;max-width:960px;padding:12px;color:#111}
h1{font-size:1.5em}h2{font-size:1.25em;border-bottom:1px solid #ccc}
.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:.9em}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right;white-space:nowrap}
td:first-child,th:first-child{text-align:left}
figure{margin:12px 0}figure svg{width:100%;height:auto}figcaption{font-weight:600}
"""


def page(blocks: list[Block], title: str) -> str:
    esc = html.escape
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{esc(title)}</title><style>{_STYLE}</style></head><body>"]  # fmt: skip
    for b in blocks:
        if b.kind in ("h1", "h2", "h3", "p"):
            parts.append(f"<{b.kind}>{esc(b.text)}</{b.kind}>")
        elif b.kind == "list":
            parts.append("<ul>" + "".join(f"<li>{esc(r[0])}</li>" for r in b.rows or []) + "</ul>")
        elif b.kind == "table":
            header, *body = b.rows or [[]]
            cells = "".join(f"<th>{esc(c)}</th>" for c in header)
            rows = "".join(
                "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in body
            )
            parts.append(f'<div class="scroll"><table><tr>{cells}</tr>{rows}</table></div>')
        elif b.kind == "plot":
            parts.append(f'<figure class="plot"><figcaption>{esc(b.text)}</figcaption>'
                         f"{b.svg}</figure>")  # fmt: skip
    parts.append("</body></html>")
    return "\n".join(parts)


def pareto_svgs(frames: dict[str, pd.DataFrame], summary: dict, folder: Path) -> dict[str, str]:
    """Each service's Pareto plot (search._plot, the pick ringed) as SVG text."""
    from search._plot import plot_pareto

    out = {}
    for service in summary["services"]:
        frame = frames.get(service["service"])
        done = None if frame is None else frame[frame["qps_per_dollar"].notna()]
        if done is None or done.empty or done["ttft_p90"].isna().all():
            continue
        best = service["recommended"]
        best_id = None
        if best is not None:
            match = done[done["label"] == best["deployment"]]
            best_id = int(match["configuration_id"].iloc[0]) if len(match) else None
        path = folder / f"pareto-{len(out)}.svg"
        plot_pareto(done, path, best_id=best_id, title=service["service"])
        text = path.read_text()
        path.unlink()
        out[service["service"]] = text[text.index("<svg"):]
    return out


def write_report(out_dir: Path, summary: dict, changes: list[dict], counts: dict,
                 frames: dict[str, pd.DataFrame]) -> Path:  # fmt: skip
    """Write the report to `out_dir/<plan>/<date>/` (replacing one of the same day)."""
    target = out_dir / summary["plan"] / summary["date"]
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{summary['date']}-", dir=target.parent))
    try:
        blocks = document(summary, changes, counts, pareto_svgs(frames, summary, staging))
        data = {"summary": summary, "changes": changes, "searches": counts}
        (staging / "report.json").write_text(json.dumps(data, indent=2, default=str))
        (staging / "report.md").write_text(markdown(blocks))
        title = f"Capacity plan {summary['plan']} {summary['date']}"
        (staging / "report.html").write_text(page(blocks, title))
        os.chmod(staging, 0o755)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{summary['date']}-old-", dir=target.parent))
            os.replace(target, old / "report")
            os.replace(staging, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target
