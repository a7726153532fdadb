"""Pareto plots: every output format, the errors, and what the figure shows."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba

from search._errors import PlotError
from search._pareto import best_configuration, pareto_front
from search._plot import (
    MISS_ALPHA,
    PLOT_FORMATS,
    SCHEDULER_MARKERS,
    _matplotlib_figure,
    _panels,
    plot_pareto,
    sku_colors,
)

SLO_LINES = {"ttft_p90": 2.0, "tbt_p99": 0.1}


def synthetic_results(n: int = 30, seed: int = 7) -> pd.DataFrame:
    """A job's results as the results database returns them: a few failed simulations
    (no metrics), one configuration without a TBT, SLO pass/fail from the latencies."""
    rng = np.random.default_rng(seed)
    skus, schedulers = ["h100-sxm", "a100-80gb", "l40s"], ["vllm", "sarathi", "orca"]
    rows = []
    for cid in range(1, n + 1):
        sku, scheduler = skus[cid % 3], schedulers[(cid // 3) % 3]
        tp, pp, batch = [1, 2, 4][cid % 3], [1, 2][cid % 2], [64, 128, 256][(cid // 2) % 3]
        qpd = float(rng.lognormal(-1.2, 0.6))
        rows.append(
            {
                "configuration_id": cid,
                "label": f"{sku} TP{tp} PP{pp} {scheduler} b{batch} c512",
                "sku": sku,
                "scheduler": scheduler,
                "num_gpus": tp * pp,
                "qps_per_dollar": qpd,
                "ttft_p90": float(rng.lognormal(np.log(0.6), 0.9)) * (1 + qpd),
                "tbt_p99": float(rng.lognormal(np.log(0.04), 0.5)) * (1 + qpd / 2),
            }
        )
    frame = pd.DataFrame(rows)
    frame.loc[[4, 17], ["qps_per_dollar", "ttft_p90", "tbt_p99"]] = np.nan  # failed
    frame.loc[23, "tbt_p99"] = np.nan
    frame["slo_passed"] = (frame["ttft_p90"] <= 2.0) & (frame["tbt_p99"] <= 0.1)
    return frame


@pytest.fixture(scope="module")
def results() -> pd.DataFrame:
    return synthetic_results()


@pytest.fixture(scope="module")
def best_id(results: pd.DataFrame) -> int:
    best = best_configuration(results)
    assert best is not None
    return int(best["configuration_id"])


MAGIC = {
    ".png": lambda data: data.startswith(b"\x89PNG\r\n\x1a\n"),
    ".svg": lambda data: b"<svg" in data[:1000],
    ".pdf": lambda data: data.startswith(b"%PDF"),
    ".html": lambda data: b"<html" in data[:1000] and b"plotly" in data,
}


@pytest.mark.parametrize("suffix", PLOT_FORMATS)
def test_each_format_writes_its_file(
    suffix: str, results: pd.DataFrame, best_id: int, tmp_path: Path
) -> None:
    if suffix == ".html":
        pytest.importorskip("plotly")
    out = tmp_path / f"pareto{suffix}"
    written = plot_pareto(results, out, slo_lines=SLO_LINES, best_id=best_id, title="job 1")
    assert written == out
    data = out.read_bytes()
    assert data and MAGIC[suffix](data)


def test_upper_case_extension(results: pd.DataFrame, tmp_path: Path) -> None:
    out = plot_pareto(results, tmp_path / "PARETO.PNG")
    assert out.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("name", ["pareto.jpg", "pareto", "pareto.png.txt"])
def test_unknown_extension(name: str, results: pd.DataFrame, tmp_path: Path) -> None:
    with pytest.raises(PlotError, match=r"\.png, \.svg, \.pdf, \.html"):
        plot_pareto(results, tmp_path / name)
    assert not (tmp_path / name).exists()


def test_html_without_plotly(
    results: pd.DataFrame, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "plotly", None)  # `import plotly` raises ImportError
    with pytest.raises(PlotError, match=r"HTML plots need plotly: pip install 'llmcap\[html\]'"):
        plot_pareto(results, tmp_path / "pareto.html")


@pytest.mark.parametrize(
    "frame",
    [
        synthetic_results().iloc[:0],
        synthetic_results().assign(qps_per_dollar=np.nan),
        synthetic_results().assign(ttft_p90=np.nan, tbt_p99=np.inf),
    ],
    ids=["empty", "no-qps-per-dollar", "no-latency"],
)
def test_nothing_to_plot(frame: pd.DataFrame, tmp_path: Path) -> None:
    with pytest.raises(PlotError, match="nothing to plot: no configuration has results"):
        plot_pareto(frame, tmp_path / "pareto.png")


def test_other_errors(results: pd.DataFrame, tmp_path: Path) -> None:
    with pytest.raises(PlotError, match="no column tbt_p99"):
        plot_pareto(results.drop(columns="tbt_p99"), tmp_path / "pareto.png")
    with pytest.raises(PlotError, match="best configuration 999"):
        plot_pareto(results, tmp_path / "pareto.png", best_id=999)
    assert isinstance(PlotError("x"), ValueError)


def test_failed_configurations_and_database_dtypes(results: pd.DataFrame, tmp_path: Path) -> None:
    # as the results database types them: nullable floats and booleans, no label column
    frame = results.drop(columns="label").astype(
        {"qps_per_dollar": "Float64", "ttft_p90": "Float64", "slo_passed": "boolean"}
    )
    frame.loc[3, "slo_passed"] = pd.NA
    frame.loc[6, "ttft_p90"] = pd.NA
    out = plot_pareto(frame, tmp_path / "pareto.png", slo_lines=SLO_LINES, best_id=np.int64(2))
    assert out.stat().st_size > 0
    # a whole panel without values still draws the other one
    out = plot_pareto(results.assign(tbt_p99=np.nan), tmp_path / "ttft-only.png")
    assert out.stat().st_size > 0


def test_panels_units_scales_and_frontiers(results: pd.DataFrame, best_id: int) -> None:
    ttft, tbt = _panels(results, SLO_LINES, best_id)
    # one unit and scale per axis, whatever the values: TTFT in s, TBT in ms, log axes
    assert (ttft.unit, ttft.slo, ttft.log_x) == ("s", 2.0, True)
    assert (tbt.unit, tbt.slo, tbt.log_x) == ("ms", 100.0, True)
    fast = results.assign(ttft_p90=results["ttft_p90"] / 100)  # all under a second
    assert _panels(fast, {}, None)[0].unit == "s"
    assert (ttft.hidden, tbt.hidden) == (2, 3)  # failed configurations are counted, not drawn
    for panel in (ttft, tbt):
        # the frontier runs over the configurations that meet the SLOs only
        points = pd.DataFrame({"y": panel.y, "x": panel.x})[panel.passed]
        assert panel.front == pareto_front(points, maximize="y", minimize="x")
        assert all(panel.passed[i] for i in panel.front)
        assert panel.best is not None and panel.passed[panel.best] and panel.best in panel.front
        assert (
            panel.labels[panel.best] == results.set_index("configuration_id").at[best_id, "label"]
        )
        assert panel.parallelism[panel.best].startswith("TP")


def _legends(fig):
    """(the status legend below the panels, the SKU / scheduler legend beside them)."""
    status = next(g for g in fig.legends if g.get_texts()[0].get_text().startswith("meets"))
    identity = next(g for g in fig.legends if g is not status)
    return status, identity


def test_figure_is_readable(results: pd.DataFrame, best_id: int) -> None:
    """The best configuration's annotation is on both panels, inside them, and covers no
    point; frontier points carry their TP/PP; the legends sit outside the panels."""
    panels = _panels(results, SLO_LINES, best_id)
    fig = _matplotlib_figure(panels, "job 1")
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    axes = fig.axes  # the two panels (the SLO ticks on top are child axes)
    assert len(axes) == 2
    label = results.set_index("configuration_id").at[best_id, "label"]
    for ax, panel in zip(axes, panels, strict=True):
        (annotation,) = [t for t in ax.texts if t.get_text().startswith("best: ")]
        assert label in annotation.get_text() and "QPS per" in annotation.get_text()
        box = annotation.get_bbox_patch().get_window_extent(renderer)
        area = ax.get_window_extent(renderer)
        assert area.x0 <= box.x0 and box.x1 <= area.x1 and area.y0 <= box.y0 and box.y1 <= area.y1
        points = ax.transData.transform(np.column_stack([panel.x, panel.y]))
        assert not any(box.contains(px, py) for px, py in points)
        tp_labels = [t.get_text() for t in ax.texts if t.get_text().startswith("TP")]
        assert sorted(tp_labels) == sorted(panel.parallelism[i] for i in panel.front)
    status, identity = _legends(fig)
    texts = [t.get_text() for t in status.get_texts()]
    assert texts[:2] == ["meets SLOs (21)", "misses SLOs (9)"]
    assert {"Pareto frontier (meets SLOs)", "SLO bound", "best configuration"} <= set(texts)
    names = [t.get_text() for t in identity.get_texts()]
    assert names == ["a100-80gb", "h100-sxm", "l40s", "orca", "sarathi", "vllm"]
    for legend in (status, identity):
        legend_box = legend.get_window_extent(renderer)
        for ax in axes:
            assert not legend_box.overlaps(ax.get_window_extent(renderer))


def test_colour_is_the_sku_and_marker_the_scheduler(results: pd.DataFrame) -> None:
    panels = _panels(results, SLO_LINES, None)
    fig = _matplotlib_figure(panels, "")
    colors = sku_colors(list(results["sku"]))
    assert len(set(colors.values())) == 3
    ax, ttft = fig.axes[0], panels[0]
    drawn = 0
    for collection in ax.collections:
        offsets = collection.get_offsets()
        if not len(offsets) or collection.get_sizes()[0] > 100:  # the best point's ring
            continue
        filled = len(collection.get_facecolors()) > 0 and collection.get_facecolors()[0][3] > 0
        rgba = collection.get_facecolors()[0] if filled else collection.get_edgecolors()[0]
        for x, y in offsets:
            (i,) = np.flatnonzero((ttft.x == x) & (ttft.y == y))
            assert tuple(np.round(rgba[:3], 3)) == tuple(
                np.round(to_rgba(colors[ttft.skus[i]])[:3], 3)
            )
            assert filled == bool(ttft.measured_pass[i])  # hollow: misses the SLOs
            if not ttft.passed[i]:
                assert collection.get_alpha() == MISS_ALPHA
            drawn += 1
    assert drawn == len(ttft.x)


def test_html_encodings(results: pd.DataFrame, best_id: int) -> None:
    pytest.importorskip("plotly")
    from search._plot import _plotly_figure

    fig = _plotly_figure(_panels(results, SLO_LINES, best_id), "job 1")
    points = [t for t in fig.data if t.mode == "markers" and t.meta not in ("best",)]
    # a legend entry per SKU (clicking hides or shows that SKU), symbols by scheduler
    assert sorted(t.name for t in points if t.showlegend) == ["a100-80gb", "h100-sxm", "l40s"]
    for trace in points:
        assert trace.marker.symbol.removesuffix("-open") == SCHEDULER_MARKERS[trace.meta][1]
        assert trace.marker.symbol.endswith("-open") == (trace.customdata[0] != "meets SLOs")
        assert all("<br>" in text for text in trace.text)
    # the scheduler filter: every scheduler, then each alone (frontier and best kept)
    (menu,) = fig.layout.updatemenus
    labels = [b.label for b in menu.buttons]
    assert labels == ["all schedulers", "orca", "sarathi", "vllm"]
    only_vllm = menu.buttons[3].args[0]["visible"]
    for trace, visible in zip(fig.data, only_vllm, strict=True):
        assert visible == (trace.meta in ("frontier", "best", "vllm"))
    texts = [a.text for a in fig.layout.annotations]
    assert sum(text.startswith("best: ") for text in texts) == 2
    assert {"SLO 2 s", "SLO 100 ms"} <= set(texts)
    assert [s.x0 for s in fig.layout.shapes] == [2.0, 100.0]


def test_ceiling_capacities_are_drawn_hollow_with_their_own_legend_entry(
    results: pd.DataFrame,
) -> None:
    passing = results.index[results["slo_passed"] & results["qps_per_dollar"].notna()]
    unmeasured = passing[:3]
    frame = results.assign(capacity_kind="measured")
    frame.loc[unmeasured, "capacity_kind"] = "ceiling"
    best = best_configuration(frame)
    assert best is not None and best["capacity_kind"] == "measured"
    panels = _panels(frame, SLO_LINES, best["configuration_id"])
    ttft = panels[0]
    assert ttft.ceiling_pass.sum() == 3 and ttft.n_ceiling == 3 and ttft.n_passed == 18
    assert not any(ttft.ceiling[i] for i in ttft.front)  # never on the frontier
    fig = _matplotlib_figure(panels, "job 1")
    ax = fig.axes[0]
    thick_hollow = [  # no fill, a thick edge in the SKU's colour
        c for c in ax.collections
        if len(c.get_offsets()) and len(c.get_facecolors()) == 0
        and c.get_linewidths()[0] == 1.8
    ]  # fmt: skip
    assert sum(len(c.get_offsets()) for c in thick_hollow) == 3
    status, _ = _legends(fig)
    texts = [t.get_text() for t in status.get_texts()]
    assert texts[:3] == [
        "meets SLOs (18)", "misses SLOs (9)",
        "meets SLOs, capacity at the analytic ceiling, not measured (3)",
    ]  # fmt: skip
    # a ceiling best says so in its annotation
    only_ceiling = frame.assign(slo_passed=frame.index.isin(unmeasured))
    ceiling_best = best_configuration(only_ceiling)
    panels = _panels(only_ceiling, SLO_LINES, ceiling_best["configuration_id"])
    fig = _matplotlib_figure(panels, "job 1")
    (annotation,) = [t for t in fig.axes[0].texts if t.get_text().startswith("best: ")]
    assert "analytic ceiling, not measured" in annotation.get_text()


def test_html_ceiling_trace(results: pd.DataFrame) -> None:
    pytest.importorskip("plotly")
    from search._plot import _plotly_figure

    frame = results.assign(capacity_kind="measured")
    frame.loc[results.index[results["slo_passed"]][:2], "capacity_kind"] = "ceiling"
    fig = _plotly_figure(_panels(frame, SLO_LINES, None), "job 1")
    states = [
        (t.customdata[0], t.marker.symbol, t.marker.line.width, len(t.x))
        for t in fig.data if t.mode == "markers" and t.customdata is not None
        and t.xaxis == "x"
    ]  # fmt: skip
    ceiling = [s for s in states if s[0] == "meets SLOs, capacity at the ceiling"]
    assert sum(n for *_, n in ceiling) == 2
    assert all(symbol.endswith("-open") and width == 2.2 for _, symbol, width, _ in ceiling)
