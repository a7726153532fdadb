"""Pareto plots: QPS per dollar against TTFT P90 and against TBT P99, one panel each.

Encodings, the same in every output format:

- SLO-passing configurations are filled circles (Okabe-Ito blue), failing ones hollow crosses
  (Okabe-Ito vermillion): shape tells them apart without colour (greyscale, colour blindness).
  A passing configuration whose capacity rests on the analytic ceiling, not a measurement
  (:func:`search._pareto.capacity_kinds`), is a hollow blue circle with its own legend entry.
- The Pareto frontier of each panel (over all plotted points, :func:`search._pareto.pareto_front`)
  is a black step line: the boundary of the region its points dominate.
- An SLO bound is a dashed vertical line, its value written above the panel.
- The best configuration (``best_id``) is ringed and annotated with its label and QPS per $/h.
- Latencies are stored in seconds and shown in ms when the panel's largest value is under 1 s;
  the x axis is logarithmic when its values span more than 1.5 decades.
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
from search._pareto import FRONTIERS, Frontier, capacity_kinds, pareto_front

__all__ = ["MATPLOTLIB_FORMATS", "PLOT_FORMATS", "plot_pareto"]

MATPLOTLIB_FORMATS = (".png", ".svg", ".pdf")
PLOT_FORMATS = (*MATPLOTLIB_FORMATS, ".html")
REQUIRED_COLUMNS = ("qps_per_dollar", "ttft_p90", "tbt_p99", "slo_passed")

# Okabe-Ito, a palette told apart by the common colour-vision deficiencies
PASS_COLOR = "#0072B2"  # blue
FAIL_COLOR = "#D55E00"  # vermillion
FRONT_COLOR = "#000000"
SLO_COLOR = "#555555"
BEST_COLOR = "#000000"

LOG_X_DECADES = 1.5  # log x when max/min exceeds 10 ** this
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


def _unit(values: np.ndarray) -> tuple[str, float]:
    finite = values[np.isfinite(values)]
    if finite.size and np.max(np.abs(finite)) < 1.0:
        return "ms", 1e3
    return "s", 1.0


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
    hover_all = _hover(frame, labels_all, y_all, passed_all, ceiling_all)
    best_all = _best_position(frame, best_id)
    panels: list[_Panel] = []
    for frontier in FRONTIERS:
        x_seconds = _floats(frame[frontier.minimize])
        keep = np.flatnonzero(np.isfinite(x_seconds) & np.isfinite(y_all))
        bound = slo_lines.get(frontier.minimize)
        bound = float(bound) if bound is not None and math.isfinite(float(bound)) else None
        unit, scale = _unit(np.append(x_seconds[keep], [] if bound is None else [bound]))
        x = x_seconds[keep] * scale
        y = y_all[keep]
        slo = None if bound is None else bound * scale
        points = pd.DataFrame({"y": y, "x": x})
        front = [int(i) for i in pareto_front(points, maximize="y", minimize="x")]
        x_range = np.append(x, [] if slo is None else [slo])
        log_x = bool(
            x_range.size
            and np.min(x_range) > 0
            and np.max(x_range) / np.min(x_range) > 10**LOG_X_DECADES
        )
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

    fig = Figure(figsize=(12.5, 5.4), dpi=150, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2, sharey=True)
    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    annotations: list[tuple[Any, _Panel, Any]] = []
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
        ok, bad, unmeasured = panel.measured_pass, ~panel.passed, panel.ceiling_pass
        ax.scatter(
            panel.x[ok], panel.y[ok], marker="o", s=38, facecolor=PASS_COLOR,
            edgecolor="white", linewidth=0.6, zorder=4,
        )  # fmt: skip
        ax.scatter(
            panel.x[unmeasured], panel.y[unmeasured], marker="o", s=38, facecolor="none",
            edgecolor=PASS_COLOR, linewidth=1.4, zorder=4,
        )  # fmt: skip
        ax.scatter(
            panel.x[bad], panel.y[bad], marker="x", s=38, color=FAIL_COLOR,
            linewidth=1.6, zorder=3,
        )  # fmt: skip
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
    handles = [
        Line2D([], [], linestyle="none", marker="o", markersize=7, markerfacecolor=PASS_COLOR,
               markeredgecolor="white", label=f"meets SLOs ({panels[0].n_passed})"),
        Line2D([], [], linestyle="none", marker="x", markersize=7, markeredgewidth=1.6,
               color=FAIL_COLOR, label=f"misses SLOs ({panels[0].n_failed})"),
        *_ceiling_handle(panels[0].n_ceiling),
        Line2D([], [], color=FRONT_COLOR, linewidth=1.3, drawstyle="steps-post",
               label="Pareto frontier"),
    ]  # fmt: skip
    if any(p.slo is not None for p in panels):
        handles.append(
            Line2D([], [], color=SLO_COLOR, linestyle=(0, (5, 3)), linewidth=1.3, label="SLO bound")
        )
    if any(p.best is not None for p in panels):
        handles.append(
            Line2D([], [], linestyle="none", marker="o", markersize=13, markerfacecolor="none",
                   markeredgecolor=BEST_COLOR, markeredgewidth=1.5, label="best configuration")
        )  # fmt: skip
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), frameon=False)
    if title:
        fig.suptitle(_tex(title), fontsize="large")
    if annotations:
        fig.draw_without_rendering()  # settle the layout, then place the text in it
        for ax, panel, annotation in annotations:
            _place_annotation(fig, ax, panel, annotation)
    return fig


CEILING_LEGEND = "meets SLOs, capacity at the analytic ceiling, not measured"


def _ceiling_handle(count: int) -> list[Any]:
    """The legend entry of passing configurations resting on the ceiling (none if none)."""
    from matplotlib.lines import Line2D

    if not count:
        return []
    return [
        Line2D([], [], linestyle="none", marker="o", markersize=7, markerfacecolor="none",
               markeredgecolor=PASS_COLOR, markeredgewidth=1.4,
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

    Tries the four diagonal directions at four distances. Ties go to the direction away from
    the panel's nearest edges (the emptier side), then to the nearer distance.
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
        for dx in (-1, 1):
            for dy in (-1, 1):
                ax0 = best_xy[0] + dx * distance * scale - (width if dx < 0 else 0.0)
                ay0 = best_xy[1] + dy * 0.8 * distance * scale - (height if dy < 0 else 0.0)
                inside = (ax0 >= area.x0 and ax0 + width <= area.x1
                          and ay0 >= area.y0 and ay0 + height <= area.y1)  # fmt: skip
                covered = int(np.count_nonzero(
                    (points[:, 0] >= ax0 - 6) & (points[:, 0] <= ax0 + width + 6)
                    & (points[:, 1] >= ay0 - 6) & (points[:, 1] <= ay0 + height + 6)
                ))  # fmt: skip
                toward_room = (dx > 0) == (fx < 0.5), (dy > 0) == (fy < 0.5)
                score = (not inside, covered, distance, not toward_room[0], not toward_room[1])
                candidates.append((score, dx, dy, distance))
    _, dx, dy, distance = min(candidates)
    annotation.xyann = (dx * distance, dy * 0.8 * distance)
    annotation.set_horizontalalignment("right" if dx < 0 else "left")
    annotation.set_verticalalignment("top" if dy < 0 else "bottom")


# ---------------------------------------------------------------- plotly


def _hover(
    frame: pd.DataFrame,
    labels: list[str],
    qpd: np.ndarray,
    passed: np.ndarray,
    ceiling: np.ndarray,
) -> list[str]:
    latencies = [(f.label_x, _floats(frame[f.minimize])) for f in FRONTIERS]
    lines = []
    for i, label in enumerate(labels):
        parts = [f"<b>{_html_escape(label)}</b>", f"{_fmt_qpd(qpd[i])} QPS per $/h"]
        for name, values in latencies:
            shown = "-" if not math.isfinite(values[i]) else _fmt_latency(values[i] * 1e3, "ms")
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
    n_pass, n_fail, n_ceiling = panels[0].n_passed, panels[0].n_failed, panels[0].n_ceiling
    for col, panel in enumerate(panels, start=1):
        first = col == 1
        hover = np.array(panel.hover, dtype=object)
        ok, bad, unmeasured = panel.measured_pass, ~panel.passed, panel.ceiling_pass
        if panel.front:
            fig.add_trace(
                go.Scatter(
                    x=panel.x[panel.front], y=panel.y[panel.front], mode="lines",
                    line={"color": FRONT_COLOR, "width": 1.5, "shape": "hv"},
                    name="Pareto frontier", legendgroup="front", showlegend=first,
                    hoverinfo="skip",
                ),
                row=1, col=col,
            )  # fmt: skip
        fig.add_trace(
            go.Scatter(
                x=panel.x[ok], y=panel.y[ok], mode="markers", text=hover[ok],
                hovertemplate="%{text}<extra></extra>",
                marker={"symbol": "circle", "size": 9, "color": PASS_COLOR,
                        "line": {"color": "white", "width": 0.8}},
                name=f"meets SLOs ({n_pass})", legendgroup="pass", showlegend=first,
            ),
            row=1, col=col,
        )  # fmt: skip
        fig.add_trace(
            go.Scatter(
                x=panel.x[bad], y=panel.y[bad], mode="markers", text=hover[bad],
                hovertemplate="%{text}<extra></extra>",
                marker={"symbol": "x-thin", "size": 9, "color": FAIL_COLOR,
                        "line": {"color": FAIL_COLOR, "width": 2}},
                name=f"misses SLOs ({n_fail})", legendgroup="fail", showlegend=first,
            ),
            row=1, col=col,
        )  # fmt: skip
        if n_ceiling:
            fig.add_trace(
                go.Scatter(
                    x=panel.x[unmeasured], y=panel.y[unmeasured], mode="markers",
                    text=hover[unmeasured], hovertemplate="%{text}<extra></extra>",
                    marker={"symbol": "circle-open", "size": 9, "color": PASS_COLOR,
                            "line": {"color": PASS_COLOR, "width": 1.6}},
                    name=f"{CEILING_LEGEND} ({n_ceiling})", legendgroup="ceiling",
                    showlegend=first,
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
        legend={"orientation": "h", "yanchor": "top", "y": -0.18, "xanchor": "center", "x": 0.5},
        margin={"b": 110},
        hovermode="closest",
    )
    return fig
