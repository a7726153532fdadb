"""`llmcap plan`: plans checked at the edge, runs stored and compared, reports written."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sqlite3
import threading
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from search._plan._sizing import replicas_for
from search._plan._spec import DemandSpec
from search.cli import cli

SERVICE = {
    "model": "meta-llama/Llama-2-7b-hf",
    "skus": ["a100-80gb"],
    "workload": {"source": "chat", "num_requests": 100},
    "budget": {"max_gpus": 1},
    "space": {"tp": [1], "schedulers": {"sarathi": {"batch_size": [32, 128],
                                                    "chunk_size": [512]}}},
    "slo": {"filters": [{"metric": "ttft", "percentile": 90, "max_s": 2}],
            "capacity_meets_filters": True},
    "capacity": {"tolerance": 0.15},
    "demand": {"peak_qps": 6, "monthly_growth": 0.1, "horizon_months": 3,
               "daily_profile": [1] * 8 + [4] * 8 + [2] * 8},
}  # fmt: skip
PRICE = {"gpus": {"a100-80gb": {"price_per_gpu_hour": 1.5, "price_source": "test rate",
                                "price_date": "2026-11-01"}}}  # fmt: skip


def write_plan(folder: Path, **service_overrides) -> Path:
    path = folder / "plan.yaml"
    service = {**SERVICE, **service_overrides}
    path.write_text(yaml.safe_dump({"name": "tiny-plan", "services": {"chat": service}}))
    return path


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def run_plan(plan: Path, db: str, out: Path, *extra: str) -> tuple[int, str]:
    return invoke("plan", "run", str(plan), "--db", db, "--out", str(out),
                  "--executor", "inline", *extra)  # fmt: skip


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A plan run once: (plan file, database file, report folder)."""
    folder = tmp_path_factory.mktemp("plan")
    plan, db = write_plan(folder), folder / "results.db"
    code, output = run_plan(plan, f"sqlite:///{db}", folder / "reports")
    assert code == 0, output
    return plan, db, folder / "reports"


@pytest.fixture
def ran(first_run, tmp_path: Path) -> tuple[Path, str, Path]:
    """A copy of the first run's database and reports, for a test to run on."""
    plan, db, reports = first_run
    with sqlite3.connect(db) as source, sqlite3.connect(tmp_path / "results.db") as copy:
        source.backup(copy)  # the WAL's pages included
    shutil.copytree(reports, tmp_path / "reports")
    return plan, f"sqlite:///{tmp_path / 'results.db'}", tmp_path / "reports"


def report_json(reports: Path) -> dict:
    (folder,) = (reports / "tiny-plan").iterdir()
    return json.loads((folder / "report.json").read_text())


def test_an_unchanged_rerun_simulates_nothing_and_exits_0(ran) -> None:
    plan, db, reports = ran
    first = report_json(reports)
    assert first["searches"]["evaluated"] == 2 and first["searches"]["simulations"] > 0
    code, output = run_plan(plan, db, reports)
    assert code == 0, output
    again = report_json(reports)
    assert again["searches"]["evaluated"] == 0 and again["searches"]["simulations"] == 0
    assert again["searches"]["reused"] == 2
    assert again["changes"] == [] and "nothing to act on since run 1" in output
    same = [{k: v for k, v in s.items() if k != "job_id"}  # each run is a new search job
            for s in (again["summary"]["services"][0], first["summary"]["services"][0])]
    assert same[0] == same[1]


def test_a_changed_price_exits_3_and_names_the_price(ran, tmp_path: Path) -> None:
    plan, db, reports = ran
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump(PRICE))
    code, output = run_plan(plan, db, reports, "--catalog", str(prices))
    assert code == 3, output
    data = report_json(reports)
    kinds = {c["kind"] for c in data["changes"]}
    assert {"price", "qps_per_dollar"} <= kinds
    (price,) = [c for c in data["changes"] if c["kind"] == "price"]
    assert "a100-80gb" in price["message"] and "$1.5/GPU-h" in price["message"]
    assert "test rate" in price["message"]
    best = data["summary"]["services"][0]["recommended"]
    assert best["price"]["price_per_gpu_hour"] == 1.5
    assert best["cost_per_hour"] == pytest.approx(1.5 * best["gpus"])
    assert best["qps_per_dollar"] == pytest.approx(best["capacity_qps"] / best["cost_per_hour"])
    # history lists both runs; diff names the price change and exits 3
    code, output = invoke("plan", "history", str(plan), "--db", db)
    assert code == 0 and "tiny-plan" in output and "│ 2" in output
    code, output = invoke("plan", "diff", "1", "2", "--db", db)
    assert code == 3 and "a100-80gb price" in output
    code, output = invoke("plan", "diff", "1", "1", "--db", db)
    assert code == 0 and "nothing crossed a threshold" in output


def test_the_fleet_is_sized_to_the_forecast_within_headroom(ran) -> None:
    _, _, reports = ran
    service = report_json(reports)["summary"]["services"][0]
    best = service["recommended"]
    today = dt.date.fromisoformat(service["fleet"][0]["date"])
    months = [dt.date(today.year + (today.month - 1 + m) // 12, (today.month - 1 + m) % 12 + 1, 1)
              for m in (1, 2, 3)]  # fmt: skip
    assert [f["date"] for f in service["fleet"][1:]] == [m.isoformat() for m in months]
    for fleet in service["fleet"]:
        n = fleet["replicas"]
        assert fleet["peak_qps"] <= 0.85 * n * best["capacity_qps"] + 1e-9
        assert n == 1 or fleet["peak_qps"] > 0.85 * (n - 1) * best["capacity_qps"]
        assert fleet["cost_per_month"] == pytest.approx(n * best["cost_per_hour"] * 730)
    assert service["fleet"][-1]["peak_qps"] == pytest.approx(6 * 1.1**3)
    daily = service["daily"]
    assert len(daily["hourly_replicas"]) == 24
    assert max(daily["hourly_replicas"]) == service["fleet"][0]["replicas"]
    assert daily["cost_per_day_scaled"] == pytest.approx(
        sum(daily["hourly_replicas"]) * best["cost_per_hour"]
    )
    (runner_up,) = service["runner_ups"]
    assert runner_up["deployment"] != best["deployment"]
    assert runner_up["qps_per_dollar"] <= best["qps_per_dollar"]


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href") and value and not value.startswith(("#", "data:")):
                self.external.append(value)


def test_the_report_is_self_contained_with_its_plots(ran) -> None:
    _, _, reports = ran
    (folder,) = (reports / "tiny-plan").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["report.html", "report.json", "report.md"]
    parser = _Links()
    parser.feed((folder / "report.html").read_text())
    # fleet cost, replicas over the day, the Pareto plot, capacity against GPUs
    assert parser.tags.count("figure") == 4
    assert parser.tags.count("svg") == 4
    assert parser.external == []
    markdown = (folder / "report.md").read_text()
    assert "| date | peak QPS | replicas |" in markdown and "Price used: a100-80gb" in markdown
    assert not [p for p in (reports / "tiny-plan").iterdir() if p.name.startswith(".")]


def test_the_report_renders_in_a_headless_browser(ran, tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no chromium binary (Debian package chromium)")
    import subprocess

    import numpy as np
    from matplotlib.image import imread

    _, _, reports = ran
    (folder,) = (reports / "tiny-plan").iterdir()
    shot = tmp_path / "shot.png"
    subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--screenshot={shot}", "--window-size=420,2400", (folder / "report.html").as_uri()],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    pixels = imread(shot)[..., :3]
    assert pixels.std() > 0.05  # text and plots, not a blank page
    # the plots' colours are on the page: Okabe-Ito blue (0, 114, 178) somewhere
    blue = np.all(np.abs(pixels - np.array([0, 114, 178]) / 255) < 0.08, axis=-1)
    assert blue.sum() > 50


def test_a_changed_workload_exits_3_and_names_it(ran, tmp_path: Path) -> None:
    _, db, reports = ran
    plan = write_plan(tmp_path, workload={"source": "code", "num_requests": 100})
    code, output = run_plan(plan, db, reports)
    assert code == 3, output
    changes = report_json(reports)["changes"]
    assert "workload" in {c["kind"] for c in changes}
    assert "search inputs changed" in output


def _summary(deployment: str | None, qps_per_dollar: float = 2.0, cost: float = 1000.0,
             price: float = 2.0, short: bool = False) -> dict:  # fmt: skip
    recommended = None if deployment is None else {
        "deployment": deployment, "qps_per_dollar": qps_per_dollar}  # fmt: skip
    short_on = [{"date": "2027-01-01", "peak_qps": 3.0, "replicas_needed": 3}]
    fleet = {"deployment": "x", "replicas": 1, "serves_qps": 1.0, "why": "", "short_on": short_on}
    return {"services": [{
        "service": "s", "spec_fingerprint": "f", "recommended": recommended,
        "fleet": [{"date": "2027-01-01", "cost_per_month": cost}] if deployment else [],
        "prices": {"h100-sxm": {"price_per_gpu_hour": price, "price_date": "2026-01-01",
                                "price_source": "list"}},
        "current_fleet": fleet if short else None, "why": "no SLO met",
    }]}  # fmt: skip


def test_compare_flags_only_what_crossed_a_threshold() -> None:
    from search._plan import compare
    from search._plan._spec import AlertSpec

    alerts = AlertSpec(qps_per_dollar_change=0.05, fleet_cost_change=0.10)
    kinds = lambda a, b: [c["kind"] for c in compare(a, b, alerts)]  # noqa: E731
    assert kinds(_summary("A"), _summary("A", qps_per_dollar=2.09, cost=1090)) == []
    assert kinds(_summary("A"), _summary("A", qps_per_dollar=2.11, cost=1110)) == [
        "qps_per_dollar", "fleet_cost"]  # fmt: skip
    assert kinds(_summary("A"), _summary("B")) == ["deployment"]
    assert kinds(_summary("A"), _summary("A", price=2.5)) == ["price"]
    assert kinds(_summary("A"), _summary(None)) == ["slo"]
    assert kinds(None, _summary(None)) == ["no_recommendation"]
    assert kinds(None, _summary("A")) == []
    (short,) = compare(_summary("A"), _summary("A", short=True), alerts)
    assert short["kind"] == "current_fleet" and "needs 3 replicas" in short["message"]


def _webhook_server() -> tuple[HTTPServer, list[dict]]:
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            received.append(json.loads(self.rfile.read(length)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, received


def test_the_webhook_gets_the_summary(ran, tmp_path: Path) -> None:
    plan, db, reports = ran
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump(PRICE))
    server, received = _webhook_server()
    try:
        url = f"http://127.0.0.1:{server.server_port}/hook"
        code, output = run_plan(plan, db, reports, "--catalog", str(prices), "--webhook", url)
    finally:
        server.shutdown()
    assert code == 3, output
    (body,) = received
    assert body["plan"] == "tiny-plan" and body["exit_status"] == 3 and body["run_id"] == 2
    assert "price" in {c["kind"] for c in body["changes"]}
    assert body["recommended"]["chat"]["price"]["price_per_gpu_hour"] == 1.5


def _state(db: Path, reports: Path) -> tuple[int, list[str]]:
    with sqlite3.connect(db) as connection:
        runs = connection.execute("SELECT count(*) FROM plan_runs").fetchone()[0]
    return runs, sorted(str(p.relative_to(reports)) for p in reports.rglob("*"))


@pytest.mark.parametrize(
    ("service", "expected"),
    [
        ({"skus": ["a100-80gb", "tpu-v9"]}, "skus.1: unknown GPU SKU 'tpu-v9'"),
        ({"model": "no/such-model"}, "model"),
        ({"demand": {"peak_qps": -1}}, "demand.peak_qps"),
        ({"demand": {"peak_qps": 5, "points": {"2027-01-01": 8, "2027-02-01": 4}}},
         "the peak falls (8 -> 4) while must_grow is true"),
        ({"demand": {"peak_qps": 5, "daily_profile": [1, 2]}}, "24 hourly shares"),
        ({"spec": "missing.yaml"}, "no spec file"),
        ({"current_fleet": {"deployment": "h200 TP8", "replicas": 2}},
         "current_fleet.deployment: 'h200 TP8' is not a feasible configuration"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_naming_the_field_and_writes_nothing(
    ran, tmp_path: Path, service: dict, expected: str
) -> None:
    _, db, reports = ran
    db_file = Path(db.removeprefix("sqlite:///"))
    before = _state(db_file, reports)
    if "spec" in service:
        service = {"demand": SERVICE["demand"], **service}
        plan = tmp_path / "plan.yaml"
        plan.write_text(yaml.safe_dump({"name": "tiny-plan", "services": {"chat": service}}))
    else:
        plan = write_plan(tmp_path, **service)
    code, output = run_plan(plan, db, reports)
    assert code == 2, output
    assert expected in output and "services.chat" in output and "Traceback" not in output
    assert _state(db_file, reports) == before


def test_an_unknown_plan_field_and_a_bad_webhook_exit_2(ran, tmp_path: Path) -> None:
    plan, db, reports = ran
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"name": "x", "headroom": 1.5, "services": {}}))
    code, output = run_plan(bad, db, reports)
    assert code == 2 and "headroom" in output and "services" in output
    code, output = run_plan(plan, db, reports, "--webhook", "ftp://example")
    assert code == 2 and "--webhook" in output


def test_an_unreachable_database_exits_2_and_writes_no_report(ran, tmp_path: Path) -> None:
    plan, _, _ = ran
    reports = tmp_path / "fresh-reports"
    code, output = run_plan(plan, f"sqlite:///{tmp_path}/no/such/dir/results.db", reports)
    assert code == 2 and "no/such/dir" in output and "Traceback" not in output
    assert not reports.exists()


def test_validate_describes_the_example_plan() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "capacity_plan.yaml"
    code, output = invoke("plan", "validate", str(example))
    assert code == 0, output
    assert "chat: meta-llama/Llama-2-7b-hf on a100-80gb, h100-sxm; 7 forecast date(s)" in output
    assert "daily profile; current fleet 8 x h100-sxm" in output
    assert "code: meta-llama/Llama-2-7b-hf on a100-80gb;" in output  # its dates pass by


def test_demand_forecasts() -> None:
    today = dt.date(2026, 11, 24)
    growth = DemandSpec(peak_qps=10, monthly_growth=0.05, horizon_months=2).forecast(today)
    assert growth == [(today, 10), (dt.date(2026, 12, 1), 10.5),
                      (dt.date(2027, 1, 1), pytest.approx(11.025))]  # fmt: skip
    points = DemandSpec(peak_qps=10, points={dt.date(2026, 1, 1): 5, dt.date(2027, 6, 1): 20},
                        must_grow=False).forecast(today)  # fmt: skip
    assert points == [(today, 10), (dt.date(2027, 6, 1), 20)]  # past points dropped
    shares = DemandSpec(peak_qps=8, daily_profile=[1] * 12 + [2] * 12).hourly_peaks()
    assert shares == [4.0] * 12 + [8.0] * 12
    assert replicas_for(8.5, 10, 0.85) == 1 and replicas_for(8.51, 10, 0.85) == 2


def _trace(path: Path, hours: float, busy_hour: int) -> Path:
    """A CSV trace: one request a minute for `hours` hours, five a minute in `busy_hour`."""
    rows = ["ts,in_tokens,out_tokens"]
    for minute in range(int(hours * 60)):
        per_minute = 5 if (minute // 60) % 24 == busy_hour else 1
        rows += [f"{minute * 60 + i},100,20" for i in range(per_minute)]
    path.write_text("\n".join(rows) + "\n")
    return path


COLUMNS = {"arrival": "ts", "prompt": "in_tokens", "output": "out_tokens"}


def test_a_daily_profile_from_a_traces_own_arrivals(tmp_path: Path) -> None:
    from search._plan._spec import load_plan

    _trace(tmp_path / "day.csv", 48, busy_hour=3)
    plan = write_plan(
        tmp_path,
        workload={"source": "chat", "num_requests": 60},
        demand={"peak_qps": 10, "daily_profile": {"trace": "day.csv", "start_hour": 8,
                                                  "format": "csv", "columns": COLUMNS}},
    )  # fmt: skip
    (service,) = load_plan(plan).services
    hourly = service.demand.hourly_peaks()
    # the trace's busy hour is its 4th, which started at 11:00 UTC (first request at 08:00)
    assert max(range(24), key=hourly.__getitem__) == 11
    assert hourly[11] == pytest.approx(10.0) and hourly[12] == pytest.approx(2.0)
    # a trace shorter than a day cannot give a daily profile: exit 2 naming the field
    _trace(tmp_path / "hour.csv", 1, busy_hour=0)
    short = write_plan(
        tmp_path,
        demand={"peak_qps": 10,
                "daily_profile": {"trace": "hour.csv", "format": "csv", "columns": COLUMNS}},
    )  # fmt: skip
    code, output = invoke("plan", "validate", str(short))
    assert code == 2 and "demand.daily_profile" in output and "whole day" in output
