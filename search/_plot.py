"""Pareto plots: QPS per dollar against TTFT P90 and against TBT P99, one panel each.

Encodings, the same in every output format:

- Colour is the GPU SKU (the Okabe-Ito palette, told apart by the common colour-vision
  deficiencies), marker shape the scheduler; each has its own legend.
- Fill says whether a configuration qualifies: filled when it meets the SLOs on a measured
  capacity, hollow and faint when it misses them, hollow with a thick edge when it meets them
  but its capacity rests on the analytic ceiling, not a measurement
  (:func:`search._pareto.capacity_kinds`).
- The Pareto frontier of each panel (over the qualifying points only,
  :func:`search._pareto.job_frontier`, so the recommendation is on it) is a black step line,
  each of its points labelled with its parallelism (TP/PP), placed where it covers no point.
- An SLO bound is a dashed vertical line, its value written above the panel.
- A disaggregated configuration (a prefill pool and a decode pool; ``layout`` column
  ``disaggregated``) is boxed by a dark square, with its own legend entry; aggregated ones
  are not.  Its colour is its prefill pool's SKU.
- The best configuration (``best_id``) is ringed and annotated with its label and QPS per $/h.
- One unit and scale per axis, whatever the job: TTFT in s, TBT in ms, both on log axes
  (linear only when some value is not positive); QPS per $/h linear from 0.
- Configurations without a value for a panel (failed, not evaluated) are left out of that panel
  and counted in its axis label.

PNG, SVG and PDF come from matplotlib. No pyplot: each plot is its own ``Figure`` rendered by the
Agg/SVG/PDF canvases, so no window ever opens, no global backend is changed and no figure is
left registered anywhere. HTML comes from plotly (optional: ``pip install 'llmcap[html]'``), a
self-contained page (plotly.js embedded, works offline) with the same encodings and hover text.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from search._capacity_kind import CAPACITY_CEILING
from search._errors import PlotError
from search._pareto import FRONTIERS, Frontier, capacity_kinds, job_frontier

__all__ = ["MATPLOTLIB_FORMATS", "PLOT_FORMATS", "plot_pareto"]

MATPLOTLIB_FORMATS = (".png", ".svg", ".pdf")
PLOT_FORMATS = (*MATPLOTLIB_FORMATS, ".html")
REQUIRED_COLUMNS = ("qps_per_dollar", "ttft_p90", "tbt_p99", "slo_passed")

# Okabe-Ito, a palette told apart by the common colour-vision deficiencies: one per SKU, in
# the order the SKUs first appear (sorted); past eight they repeat with another edge
SKU_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
              "#000000")  # fmt: skip
# scheduler -> (matplotlib marker, plotly symbol); others a star
SCHEDULER_MARKERS = {
    "sarathi": ("o", "circle"), "vllm": ("s", "square"), "orca": ("^", "triangle-up"),
    "sglang": ("D", "diamond"), "static": ("v", "triangle-down"),
}  # fmt: skip
OTHER_MARKER = ("*", "star")
MISS_ALPHA = 0.45  # faint: configurations that miss the SLOs
FRONT_COLOR = "#000000"
SLO_COLOR = "#555555"
BEST_COLOR = "#000000"
# a disaggregated configuration (prefill and decode pools) is boxed: (matplotlib, plotly)
DISAGG_MARKER = ("s", "square-open")
DISAGG_COLOR = "#333333"
DISAGG_LEGEND = "disaggregated: prefill + decode pools (boxed)"
# one unit per latency axis, whatever the job (seconds -> shown)
AXIS_UNITS = {"ttft_p90": ("s", 1.0), "tbt_p99": ("ms", 1e3)}
NOTHING_TO_PLOT = "nothing to plot: no configuration has results"


@dataclass(slots=True)
class _Panel:
    """One frontier's points, ready to draw (latencies already in display units)."""

    frontier: Frontier
    unit: str  # "ms" or "s"
    scale: float  # seconds -> unit
    x: np.ndarray
    y: np.ndarray
    passed: np.ndarray
    ceiling: np.ndarray  # capacity rests on the analytic ceiling (drawn apart when passing)
    skus: list[str]  # colour
    schedulers: list[str]  # marker
    disaggregated: np.ndarray  # a prefill and a decode pool (boxed), else aggregated
    parallelism: list[str]  # "TP2 PP1": the label of a frontier point
    labels: list[str]
    hover: list[str]  # HTML hover text: label and metrics
    front: list[int]  # positions in x/y, along the frontier (x ascending)
    best: int | None  # position of the best configuration, if plotted here
    slo: float | None  # SLO bound in display units
    hidden: int  # configurations without a value for this panel
    log_x: bool
    xlim: tuple[float, float]
    ylim: tuple[float, float]
    n_passed: int  # measured configurations meeting the SLOs, in the frame, plotted or not
    n_failed: int
    n_ceiling: int  # configurations meeting the SLOs on a capacity resting on the ceiling

    @property
    def measured_pass(self) -> np.ndarray:
        return self.passed & ~self.ceiling

    @property
    def ceiling_pass(self) -> np.ndarray:
        return self.passed & self.ceiling

    @property
    def qualifying(self) -> np.ndarray:
        return self.measured_pass

    @property
    def x_label(self) -> str:
        text = f"{self.frontier.label_x} ({self.unit})"
        if self.log_x:
            text += ", log scale"
        if self.hidden:
            text += f"   [{self.hidden} without a {self.frontier.label_x} not shown]"
        return text


def plot_pareto(
    frame: pd.DataFrame,
    out: Path,
    *,
    slo_lines: Mapping[str, float] | None = None,
    best_id: Hashable | None = None,
    title: str = "",
) -> Path:
    """Draw QPS per dollar against TTFT P90 and against TBT P99 to ``out``; returns ``out``.

    ``frame`` has one row per evaluated configuration with the columns ``qps_per_dollar``,
    ``ttft_p90`` and ``tbt_p99`` (seconds), ``slo_passed``, and optionally ``configuration_id``,
    ``label`` and ``capacity_kind``. ``slo_lines`` maps ``"ttft_p90"``/``"tbt_p99"`` to an SLO
    bound in seconds (other keys are ignored). ``best_id`` is the ``configuration_id`` (the
    index label when the frame has no such column) of the configuration to annotate; ``None``
    annotates none.
    The file type follows the extension of ``out``: .png, .svg, .pdf or .html; the parent
    folder must exist (it is never created).

    Raises :class:`PlotError` for an unknown extension, for HTML without plotly, for a frame
    with nothing to plot, or for a ``best_id`` the frame does not have.
    """
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in PLOT_FORMATS:
        raise PlotError(
            f"cannot write a plot to {str(out)!r}: unknown file type {out.suffix or '(none)'!r}; "
            f"use one of {', '.join(PLOT_FORMATS)}"
        )
    if suffix == ".html":
        try:
            import plotly  # noqa: F401
        except ImportError:
            raise PlotError("HTML plots need plotly: pip install 'llmcap[html]'") from None
    panels = _panels(frame, slo_lines or {}, best_id)
    if suffix == ".html":
        _draw_plotly(panels, out, title)
    else:
        _draw_matplotlib(panels, out, title)
    return out


# ---------------------------------------------------------------- data


def _floats(series: pd.Series) -> np.ndarray:
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)


def _labels(frame: pd.DataFrame) -> list[str]:
    ids = frame["configuration_id"] if "configuration_id" in frame.columns else frame.index
    if "label" not in frame.columns:
        return [f"config {cid}" for cid in ids]
    return [
        f"config {cid}" if pd.isna(label) or not str(label) else str(label)
        for label, cid in zip(frame["label"], ids, strict=True)
    ]


def _best_position(frame: pd.DataFrame, best_id: Hashable | None) -> int | None:
    if best_id is None:
        return None
    ids = frame["configuration_id"] if "configuration_id" in frame.columns else frame.index
    hits = np.flatnonzero(np.asarray(ids == best_id, dtype=bool))
    if hits.size == 0:
        raise PlotError(f"best configuration {best_id!r} is not in the plotted results")
    return int(hits[0])


def _column(frame: pd.DataFrame, name: str) -> list[str]:
    if name not in frame.columns:
        return [""] * len(frame)
    return ["" if pd.isna(v) else str(v) for v in frame[name]]


def _parallelism(frame: pd.DataFrame) -> list[str]:
    """Each point's parallelism ("TP2 PP1"), or its pools ("2P1D TP4/TP8") when disaggregated."""
    if {"tp", "pp"} <= set(frame.columns):
        own = [
            "" if pd.isna(tp) or pd.isna(pp) else f"TP{int(tp)} PP{int(pp)}"
            for tp, pp in zip(frame["tp"], frame["pp"], strict=True)
        ]
    else:  # results without the columns: from the label ("h100-sxm TP2 PP1 sarathi ...")
        own = [" ".join(w for w in x.split() if w[:2] in ("TP", "PP")) for x in _labels(frame)]
    pools = _column(frame, "pools")
    return [p if p and p != "aggregated" else o for p, o in zip(pools, own, strict=True)]


def sku_colors(skus: list[str]) -> dict[str, str]:
    """Each SKU's colour, in sorted order of the SKUs present."""
    return {sku: SKU_COLORS[i % len(SKU_COLORS)] for i, sku in enumerate(sorted(set(skus)))}


def scheduler_marker(scheduler: str) -> tuple[str, str]:
    """(matplotlib marker, plotly symbol) of a scheduler."""
    return SCHEDULER_MARKERS.get(scheduler, OTHER_MARKER)


def _limits(values: np.ndarray, log: bool, floor_zero: bool) -> tuple[float, float]:
    lo, hi = float(np.min(values)), float(np.max(values))
    if log:
        pad = max(0.06 * math.log10(hi / lo), 0.04)
        return lo / 10**pad, hi * 10**pad
    span = hi - lo or abs(hi) or 1.0
    lo, hi = lo - 0.06 * span, hi + 0.06 * span
    if floor_zero and lo < 0 <= float(np.min(values)):
        lo = 0.0
    return lo, hi


def _panels(
    frame: pd.DataFrame, slo_lines: Mapping[str, float], best_id: Hashable | None
) -> list[_Panel]:
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise PlotError(f"cannot plot: the results have no column {', '.join(missing)}")
    y_all = _floats(frame["qps_per_dollar"])
    passed_all = frame["slo_passed"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    ceiling_all = (capacity_kinds(frame) == CAPACITY_CEILING).to_numpy(dtype=bool)
    labels_all = _labels(frame)
    skus_all = _column(frame, "sku")
    schedulers_all = _column(frame, "scheduler")
    disaggregated_all = np.array([v == "disaggregated" for v in _column(frame, "layout")])
    parallelism_all = _parallelism(frame)
    hover_all = _hover(frame, labels_all, y_all, passed_all, ceiling_all)
    best_all = _best_position(frame, best_id)
    panels: list[_Panel] = []
    for frontier in FRONTIERS:
        x_seconds = _floats(frame[frontier.minimize])
        keep = np.flatnonzero(np.isfinite(x_seconds) & np.isfinite(y_all))
        bound = slo_lines.get(frontier.minimize)
        bound = float(bound) if bound is not None and math.isfinite(float(bound)) else None
        unit, scale = AXIS_UNITS.get(frontier.minimize, ("s", 1.0))
        x = x_seconds[keep] * scale
        y = y_all[keep]
        slo = None if bound is None else bound * scale
        points = pd.DataFrame(
            {"y": y, "x": x, "slo_passed": passed_all[keep],
             "capacity_kind": np.where(ceiling_all[keep], CAPACITY_CEILING, "measured")}
        )  # fmt: skip
        panel_frontier = Frontier(frontier.name, "y", "x", frontier.label_x, frontier.label_y)
        front = [int(i) for i in job_frontier(points, panel_frontier)]
        x_range = np.append(x, [] if slo is None else [slo])
        log_x = bool(x_range.size and np.min(x_range) > 0)
        best = None
        if best_all is not None and best_all in keep:
            best = int(np.flatnonzero(keep == best_all)[0])
        panels.append(
            _Panel(
                frontier=frontier,
                unit=unit,
                scale=scale,
                x=x,
                y=y,
                passed=passed_all[keep],
                ceiling=ceiling_all[keep],
                skus=[skus_all[i] for i in keep],
                schedulers=[schedulers_all[i] for i in keep],
                disaggregated=disaggregated_all[keep] if keep.size else np.zeros(0, dtype=bool),
                parallelism=[parallelism_all[i] for i in keep],
                labels=[labels_all[i] for i in keep],
                hover=[hover_all[i] for i in keep],
                front=front,
                best=best,
                slo=slo,
                hidden=len(frame) - keep.size,
                log_x=log_x,
                xlim=_limits(x_range, log_x, floor_zero=True) if x_range.size else (0.0, 1.0),
                ylim=(0.0, 1.0),
                n_passed=int((passed_all & ~ceiling_all).sum()),
                n_failed=int((~passed_all).sum()),
                n_ceiling=int((passed_all & ceiling_all).sum()),
            )
        )
    if all(p.x.size == 0 for p in panels):
        raise PlotError(NOTHING_TO_PLOT)
    # one y axis for both panels, from 0 unless some value is negative; headroom on top
    y_values = np.concatenate([p.y for p in panels])
    top = float(np.max(y_values))
    bottom = min(0.0, float(np.min(y_values)))
    span = top - bottom or abs(top) or 1.0
    for panel in panels:
        panel.ylim = (bottom - (0.03 * span if bottom < 0 else 0.0), top + 0.10 * span)
    return panels


def _fmt_qpd(value: float) -> str:
    return f"{value:.3g}"


def _fmt_latency(value: float, unit: str) -> str:
    return f"{value:.4g} {unit}"


# ---------------------------------------------------------------- matplotlib


def _tex(text: str) -> str:
    """Text as matplotlib shows it literally (a pair of '$' would start mathtext)."""
    return text.replace("$", r"\$")


def _draw_matplotlib(panels: list[_Panel], out: Path, title: str) -> None:
    fig = _matplotlib_figure(panels, title)
    fig.savefig(out, dpi=fig.dpi, metadata=_metadata(out.suffix.lower(), title))


def _matplotlib_figure(panels: list[_Panel], title: str) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

    fig = Figure(figsize=(13.5, 5.8), dpi=150, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2, sharey=True)
    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    annotations: list[tuple[Any, _Panel, Any]] = []
    colors = sku_colors([s for p in panels for s in p.skus])
    front_labels: list[tuple[Any, _Panel, list[Any]]] = []
    for index, (ax, panel) in enumerate(zip(axes, panels, strict=True)):
        ax.set_axisbelow(True)
        ax.grid(True, which="major", color="#dddddd", linewidth=0.6)
        if panel.log_x:
            ax.set_xscale("log")
            decades = math.log10(panel.xlim[1] / panel.xlim[0])
            ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            if decades > 3.5:
                ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0,)))
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.xaxis.set_major_formatter(plain)
        ax.set_xlim(*panel.xlim)
        ax.set_ylim(*panel.ylim)
        ax.set_xlabel(_tex(panel.x_label))
        if index == 0:
            ax.set_ylabel(_tex(panel.frontier.label_y))
        ax.set_title(
            _tex(f"{panel.frontier.label_y} vs {panel.frontier.label_x}"), fontsize="medium"
        )
        if panel.x.size == 0:
            ax.set_xticks([])
            ax.text(
                0.5, 0.5, f"no configuration has a {panel.frontier.label_x}",
                transform=ax.transAxes, ha="center", va="center", color="#555555",
            )  # fmt: skip
            continue
        if panel.front:
            ax.plot(
                panel.x[panel.front], panel.y[panel.front], drawstyle="steps-post",
                color=FRONT_COLOR, linewidth=1.3, zorder=2,
            )  # fmt: skip
        _scatter_groups(ax, panel, colors)
        front_labels.append((ax, panel, _label_frontier(ax, panel)))
        if panel.slo is not None:
            ax.axvline(panel.slo, color=SLO_COLOR, linestyle=(0, (5, 3)), linewidth=1.3, zorder=1)
            # the bound's value as a tick on top of the panel, where it can cover no point
            top = ax.secondary_xaxis("top")
            top.set_xticks([panel.slo], labels=[f"SLO {panel.slo:g} {panel.unit}"])
            top.xaxis.set_minor_locator(NullLocator())
            top.tick_params(axis="x", colors=SLO_COLOR, labelsize="small", length=5)
            top.spines["top"].set_visible(False)
        if panel.best is not None:
            annotations.append((ax, panel, _annotate_best(ax, panel)))
    grey = "#777777"
    handles = [
        Line2D([], [], linestyle="none", marker="o", markersize=7, markerfacecolor=grey,
               markeredgecolor=grey, label=f"meets SLOs ({panels[0].n_passed})"),
        Line2D([], [], linestyle="none", marker="o", markersize=7, markerfacecolor="none",
               markeredgecolor=grey, alpha=MISS_ALPHA,
               label=f"misses SLOs ({panels[0].n_failed})"),
        *_ceiling_handle(panels[0].n_ceiling),
        Line2D([], [], color=FRONT_COLOR, linewidth=1.3, drawstyle="steps-post",
               label="Pareto frontier (meets SLOs)"),
    ]  # fmt: skip
    if any(p.slo is not None for p in panels):
        handles.append(
            Line2D([], [], color=SLO_COLOR, linestyle=(0, (5, 3)), linewidth=1.3, label="SLO bound")
        )
    if any(p.disaggregated.any() for p in panels):
        handles.append(
            Line2D([], [], linestyle="none", marker=DISAGG_MARKER[0], markersize=11,
                   markerfacecolor="none", markeredgecolor=DISAGG_COLOR, label=DISAGG_LEGEND)
        )  # fmt: skip
    if any(p.best is not None for p in panels):
        handles.append(
            Line2D([], [], linestyle="none", marker="o", markersize=13, markerfacecolor="none",
                   markeredgecolor=BEST_COLOR, markeredgewidth=1.5, label="best configuration")
        )  # fmt: skip
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), frameon=False)
    _identity_legends(fig, colors, sorted({s for p in panels for s in p.schedulers}))
    if title:
        fig.suptitle(_tex(title), fontsize="large")
    if annotations or front_labels:
        fig.draw_without_rendering()  # settle the layout, then place the text in it
        for ax, panel, annotation in annotations:
            _place_annotation(fig, ax, panel, annotation)
        for ax, panel, texts in front_labels:
            _place_front_labels(fig, ax, panel, texts)
    return fig


def _scatter_groups(ax: Any, panel: _Panel, colors: Mapping[str, str]) -> None:
    """One scatter per (SKU, scheduler, fill): colour by SKU, marker by scheduler, filled when
    the configuration qualifies, faint when it misses the SLOs, thick-edged on the ceiling."""
    skus = np.array(panel.skus, dtype=object)
    schedulers = np.array(panel.schedulers, dtype=object)
    fills = (
        (panel.measured_pass, {"linewidth": 0.6}, True),
        (~panel.passed, {"linewidth": 1.0, "alpha": MISS_ALPHA}, False),
        (panel.ceiling_pass, {"linewidth": 1.8}, False),
    )
    for sku in sorted(set(panel.skus)):
        color = colors.get(sku, SKU_COLORS[0])
        for scheduler in sorted(set(panel.schedulers)):
            group = (skus == sku) & (schedulers == scheduler)
            marker = scheduler_marker(scheduler)[0]
            for mask, style, filled in fills:
                pick = group & mask
                if pick.any():
                    ax.scatter(
                        panel.x[pick], panel.y[pick], marker=marker, s=40,
                        facecolor=color if filled else "none",
                        edgecolor="white" if filled else color, zorder=4 if filled else 3,
                        **style,
                    )  # fmt: skip
    if panel.disaggregated.any():
        pick = panel.disaggregated
        ax.scatter(
            panel.x[pick], panel.y[pick], marker=DISAGG_MARKER[0], s=130, facecolor="none",
            edgecolor=DISAGG_COLOR, linewidth=0.9, zorder=5, gid="disaggregated",
        )  # fmt: skip


def _identity_legends(fig: Any, colors: Mapping[str, str], schedulers: list[str]) -> None:
    """The SKU colours and scheduler markers, above the panels."""
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], linestyle="none", marker="o", markersize=7, markerfacecolor=color,
               markeredgecolor=color, label=sku or "(no SKU)")
        for sku, color in colors.items()
    ] + [
        Line2D([], [], linestyle="none", marker=scheduler_marker(s)[0], markersize=7,
               markerfacecolor="#777777", markeredgecolor="#777777", label=s or "(no scheduler)")
        for s in schedulers
    ]  # fmt: skip
    if handles:
        fig.legend(
            handles=handles, loc="outside right upper", ncol=1, frameon=False,
            title="colour: GPU SKU\nmarker: scheduler", title_fontsize="small",
            alignment="left",
        )  # fmt: skip


def _label_frontier(ax: Any, panel: _Panel) -> list[Any]:
    """A TP/PP label beside each frontier point (placed once the layout is settled)."""
    texts = []
    for i in panel.front:
        if not panel.parallelism[i]:
            continue
        text = ax.annotate(
            panel.parallelism[i], xy=(panel.x[i], panel.y[i]), xytext=(5, 5),
            textcoords="offset points", fontsize="x-small", color="#333333", zorder=5,
        )  # fmt: skip
        text.set_in_layout(False)
        texts.append((i, text))
    return texts


_LABEL_OFFSETS_PT = ((5, 5), (5, -12), (-5, 5), (-5, -12), (8, 14), (8, -20), (-8, 14), (-8, -20))


def _place_front_labels(fig: Any, ax: Any, panel: _Panel, texts: list[Any]) -> None:
    """Each frontier label at the offset where it covers the fewest points and earlier labels,
    inside the panel."""
    renderer = fig.canvas.get_renderer()
    points = ax.transData.transform(np.column_stack([panel.x, panel.y]))
    area = ax.get_window_extent(renderer)
    scale = fig.dpi / 72
    taken: list[tuple[float, float, float, float]] = []
    for i, text in texts:
        box = text.get_window_extent(renderer)
        width, height = box.width, box.height
        px, py = points[i]
        best = None
        for dx, dy in _LABEL_OFFSETS_PT:
            x0 = px + dx * scale - (width if dx < 0 else 0.0)
            y0 = py + dy * scale
            inside = area.x0 <= x0 and x0 + width <= area.x1 and area.y0 <= y0 <= area.y1 - height
            covered = int(np.count_nonzero(
                (points[:, 0] >= x0 - 4) & (points[:, 0] <= x0 + width + 4)
                & (points[:, 1] >= y0 - 4) & (points[:, 1] <= y0 + height + 4)
            ))  # fmt: skip
            clash = sum(
                x0 < bx1 and bx0 < x0 + width and y0 < by1 and by0 < y0 + height
                for bx0, by0, bx1, by1 in taken
            )
            score = (not inside, covered + clash)
            if best is None or score < best[0]:
                best = (score, dx, dy, (x0, y0, x0 + width, y0 + height))
        _, dx, dy, placed = best
        text.xyann = (dx, dy)
        text.set_horizontalalignment("right" if dx < 0 else "left")
        taken.append(placed)


CEILING_LEGEND = "meets SLOs, capacity at the analytic ceiling, not measured"


def _ceiling_handle(count: int) -> list[Any]:
    """The legend entry of passing configurations resting on the ceiling (none if none)."""
    from matplotlib.lines import Line2D

    if not count:
        return []
    return [
        Line2D([], [], linestyle="none", marker="o", markersize=7, markerfacecolor="none",
               markeredgecolor="#777777", markeredgewidth=1.8,
               label=f"{CEILING_LEGEND} ({count})")
    ]  # fmt: skip


def _best_text(panel: _Panel, i: int, newline: str) -> str:
    """The best point's annotation: label, QPS per $/h, and whether it is a measurement."""
    text = f"best: {panel.labels[i]}{newline}{_fmt_qpd(panel.y[i])} QPS per $/h"
    if panel.ceiling[i]:
        text += f"{newline}(capacity at the analytic ceiling, not measured)"
    return text


def _metadata(suffix: str, title: str) -> dict[str, Any]:
    """No creation date in SVG/PDF (the same plot gives the same file); the title if any."""
    metadata: dict[str, Any] = {"Title": title} if title else {}
    if suffix == ".svg":
        metadata["Date"] = None
    elif suffix == ".pdf":
        metadata["CreationDate"] = None
    return metadata


def _annotate_best(ax: Any, panel: _Panel) -> Any:
    """Ring the best point and write its label and QPS/$ beside it (placed later)."""
    i = panel.best
    assert i is not None
    x, y = panel.x[i], panel.y[i]
    ax.scatter([x], [y], marker="o", s=190, facecolor="none", edgecolor=BEST_COLOR,
               linewidth=1.5, zorder=5)  # fmt: skip
    annotation = ax.annotate(
        _tex(_best_text(panel, i, "\n")),
        xy=(x, y), xytext=(36, -30), textcoords="offset points", ha="left", va="top",
        multialignment="left", fontsize="small", zorder=6,
        bbox={"boxstyle": "round,pad=0.35", "facecolor": "white", "edgecolor": "#888888",
              "alpha": 0.92},
        arrowprops={"arrowstyle": "->", "color": BEST_COLOR, "linewidth": 1.1,
                    "shrinkB": 8},
    )  # fmt: skip
    annotation.set_in_layout(False)  # placed inside the panel; must not move the layout
    return annotation


_OFFSETS_PT = (36.0, 72.0, 144.0, 216.0)  # distances tried between the best point and its text


def _place_annotation(fig: Any, ax: Any, panel: _Panel, annotation: Any) -> None:
    """Put the text where it covers the fewest points and stays inside the panel.

    Tries six directions (left, centred and right of the point, above and below) at four
    distances, each slid sideways into the panel where it would stick out.  Ties go to the
    direction away from the panel's nearest edges (the emptier side), then to the nearer
    distance.
    """
    from matplotlib.text import Text

    renderer = fig.canvas.get_renderer()
    text_box = Text.get_window_extent(annotation, renderer)
    pad = 0.35 * annotation.get_fontsize() * fig.dpi / 72 + 4.0
    width, height = text_box.width + 2 * pad, text_box.height + 2 * pad
    points = ax.transData.transform(np.column_stack([panel.x, panel.y]))
    area = ax.get_window_extent(renderer)
    best_xy = points[panel.best]
    fx = (best_xy[0] - area.x0) / max(area.width, 1.0)
    fy = (best_xy[1] - area.y0) / max(area.height, 1.0)
    scale = fig.dpi / 72
    candidates = []
    for distance in _OFFSETS_PT:
        for dx in (-1, 0, 1):  # left of the point, centred on it, right of it
            for dy in (-1, 1):
                ax0 = best_xy[0] + dx * distance * scale - width * (0.5 if dx == 0 else dx < 0)
                # slid sideways into the panel where it would stick out
                ax0 = min(max(ax0, area.x0 + 2.0), area.x1 - width - 2.0)
                ay0 = best_xy[1] + dy * 0.8 * distance * scale - (height if dy < 0 else 0.0)
                inside = ax0 >= area.x0 and ay0 >= area.y0 and ay0 + height <= area.y1
                covered = int(np.count_nonzero(
                    (points[:, 0] >= ax0 - 6) & (points[:, 0] <= ax0 + width + 6)
                    & (points[:, 1] >= ay0 - 6) & (points[:, 1] <= ay0 + height + 6)
                ))  # fmt: skip
                toward_room = (dx > 0) == (fx < 0.5), (dy > 0) == (fy < 0.5)
                score = (not inside, covered, distance, not toward_room[0], not toward_room[1])
                candidates.append((score, ax0 + pad, dy, distance))
    _, left, dy, distance = min(candidates)
    annotation.xyann = ((left - best_xy[0]) / scale, dy * 0.8 * distance)
    annotation.set_horizontalalignment("left")
    annotation.set_verticalalignment("top" if dy < 0 else "bottom")


# ---------------------------------------------------------------- plotly


def _hover(
    frame: pd.DataFrame,
    labels: list[str],
    qpd: np.ndarray,
    passed: np.ndarray,
    ceiling: np.ndarray,
) -> list[str]:
    latencies = [
        (f.label_x, _floats(frame[f.minimize]), *AXIS_UNITS.get(f.minimize, ("s", 1.0)))
        for f in FRONTIERS
    ]  # in the unit of the panel's axis
    lines = []
    for i, label in enumerate(labels):
        parts = [f"<b>{_html_escape(label)}</b>", f"{_fmt_qpd(qpd[i])} QPS per $/h"]
        for name, values, unit, scale in latencies:
            shown = "-" if not math.isfinite(values[i]) else _fmt_latency(values[i] * scale, unit)
            parts.append(f"{name}: {shown}")
        parts.append("meets SLOs" if passed[i] else "misses SLOs")
        if ceiling[i]:
            parts.append("capacity at the analytic ceiling, not measured")
        lines.append("<br>".join(parts))
    return lines


def _html_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _draw_plotly(panels: list[_Panel], out: Path, title: str) -> None:
    _plotly_figure(panels, title).write_html(out, include_plotlyjs=True, full_html=True)


def _plotly_figure(panels: list[_Panel], title: str) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(
        rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.06,
        subplot_titles=[f"{p.frontier.label_y} vs {p.frontier.label_x}" for p in panels],
    )  # fmt: skip
    colors = sku_colors([s for p in panels for s in p.skus])
    for col, panel in enumerate(panels, start=1):
        first = col == 1
        hover = np.array(panel.hover, dtype=object)
        if panel.front:
            fig.add_trace(
                go.Scatter(
                    x=panel.x[panel.front], y=panel.y[panel.front], mode="lines+text",
                    line={"color": FRONT_COLOR, "width": 1.5, "shape": "hv"},
                    text=[panel.parallelism[i] for i in panel.front],
                    textposition="top left", textfont={"size": 10, "color": "#333333"},
                    name="Pareto frontier (meets SLOs)", legendgroup="front",
                    showlegend=first, hoverinfo="skip", meta="frontier",
                ),
                row=1, col=col,
            )  # fmt: skip
        skus = np.array(panel.skus, dtype=object)
        schedulers = np.array(panel.schedulers, dtype=object)
        fills = (
            ("meets SLOs", panel.measured_pass, "", 1.0, 0.8),
            ("misses SLOs", ~panel.passed, "-open", MISS_ALPHA, 1.2),
            ("meets SLOs, capacity at the ceiling", panel.ceiling_pass, "-open", 1.0, 2.2),
        )
        for sku in sorted(set(panel.skus)):
            color = colors.get(sku, SKU_COLORS[0])
            shown = False
            for scheduler in sorted(set(panel.schedulers)):
                symbol = scheduler_marker(scheduler)[1]
                for state, mask, suffix, opacity, width in fills:
                    pick = (skus == sku) & (schedulers == scheduler) & mask
                    if not pick.any():
                        continue
                    fig.add_trace(
                        go.Scatter(
                            x=panel.x[pick], y=panel.y[pick], mode="markers",
                            text=hover[pick], hovertemplate="%{text}<extra></extra>",
                            marker={"symbol": symbol + suffix, "size": 10, "color": color,
                                    "opacity": opacity,
                                    "line": {"color": "white" if not suffix else color,
                                             "width": width}},
                            name=sku or "(no SKU)", legendgroup=sku,
                            showlegend=first and not shown, meta=scheduler,
                            customdata=[state] * int(pick.sum()),
                        ),
                        row=1, col=col,
                    )  # fmt: skip
                    shown = True
        if panel.disaggregated.any():
            pick = panel.disaggregated
            fig.add_trace(
                go.Scatter(
                    x=panel.x[pick], y=panel.y[pick], mode="markers", hoverinfo="skip",
                    marker={"symbol": DISAGG_MARKER[1], "size": 17,
                            "line": {"color": DISAGG_COLOR, "width": 1}},
                    name=DISAGG_LEGEND, legendgroup="disaggregated", showlegend=first,
                    meta="disaggregated",
                ),
                row=1, col=col,
            )  # fmt: skip
        if panel.slo is not None:
            # shapes take data values on a log axis, annotations log10 of them
            fig.add_vline(
                x=panel.slo, line={"color": SLO_COLOR, "dash": "dash", "width": 1.3},
                row=1, col=col,
            )  # fmt: skip
            fig.add_annotation(
                x=math.log10(panel.slo) if panel.log_x else panel.slo, y=1.0, yref="y domain",
                text=f"SLO {panel.slo:g} {panel.unit}", showarrow=False, textangle=-90,
                xanchor="right", yanchor="top", font={"color": SLO_COLOR, "size": 11},
                row=1, col=col,
            )  # fmt: skip
        if panel.best is not None:
            i = panel.best
            fig.add_trace(
                go.Scatter(
                    x=[panel.x[i]], y=[panel.y[i]], mode="markers", hoverinfo="skip",
                    marker={"symbol": "circle-open", "size": 18, "color": BEST_COLOR,
                            "line": {"width": 2}},
                    name="best configuration", legendgroup="best", showlegend=first,
                    meta="best",
                ),
                row=1, col=col,
            )  # fmt: skip
            fig.add_annotation(
                x=math.log10(panel.x[i]) if panel.log_x else panel.x[i], y=panel.y[i],
                text=_html_escape(_best_text(panel, i, "\n")).replace("\n", "<br>"),
                showarrow=True, arrowhead=2, ax=-60 if col == 1 else 60, ay=-45,
                bgcolor="rgba(255,255,255,0.9)", bordercolor="#888888", font={"size": 11},
                row=1, col=col,
            )  # fmt: skip
        fig.update_xaxes(
            title_text=panel.x_label, type="log" if panel.log_x else "linear",
            range=[math.log10(v) for v in panel.xlim] if panel.log_x else list(panel.xlim),
            row=1, col=col,
        )  # fmt: skip
    fig.update_yaxes(
        title_text=panels[0].frontier.label_y, range=list(panels[0].ylim), row=1, col=1
    )
    fig.update_layout(
        title={"text": title} if title else None,
        template="plotly_white",
        legend={"orientation": "h", "yanchor": "top", "y": -0.18, "xanchor": "center", "x": 0.5,
                "title": {"text": "GPU SKU (click to hide or show):"}},
        margin={"b": 110, "t": 90},
        hovermode="closest",
        updatemenus=[_scheduler_filter(fig)],
        annotations=[*fig.layout.annotations, {
            "text": "filled: meets SLOs; hollow, faint: misses them; hollow, thick: meets them "
                    "on a capacity at the analytic ceiling. Marker: scheduler.",
            "showarrow": False, "xref": "paper", "yref": "paper", "x": 0.5, "y": 1.12,
            "font": {"size": 11, "color": "#555555"},
        }],
    )  # fmt: skip
    return fig


def _scheduler_filter(fig: Any) -> dict:
    """A menu that shows every scheduler's points or one scheduler's (frontier and best kept)."""
    metas = [trace.meta for trace in fig.data]
    schedulers = sorted({m for m in metas if m not in (None, "frontier", "best")})
    buttons = [{"label": "all schedulers", "method": "restyle", "args": [{"visible": True}]}]
    for scheduler in schedulers:
        visible = [m in (None, "frontier", "best", scheduler) for m in metas]
        buttons.append(
            {"label": scheduler or "(none)", "method": "restyle", "args": [{"visible": visible}]}
        )
    return {"buttons": buttons, "direction": "down", "x": 0.0, "xanchor": "left", "y": 1.2,
            "yanchor": "top", "showactive": True}  # fmt: skip
