"""Search jobs under interruptions and concurrent drivers: nothing lost, doubled, or wrong.

    .venv/bin/python benchmarks/job_reliability.py kill          # kill -9 / SIGTERM / SIGINT
    .venv/bin/python benchmarks/job_reliability.py concurrent --runs 10 [--postgres URL]

`kill`: one uninterrupted run of a small spec is the reference.  Then, for each signal
(SIGKILL to the driver alone, SIGTERM to the driver alone as `search cancel` sends it,
SIGINT to the driver's process group as Ctrl-C does) and each of five points (after 1, 3,
5 and 7 configurations are done, and during refinement), a driver is started on a fresh
database, signalled at that point, its job state checked (cancelled, or interrupted once
the lease has passed), its pool workers checked gone, and the job resumed with
`--resume`.  Counted: results lost (a result stored before the signal missing or changed
other than by its refinement), duplicated (more result rows than configurations, or a
configuration simulated twice), final results that differ from the reference, wrong job
states, workers left behind.

`concurrent`: two drivers started together on one database, of the same spec and of two
different specs, on SQLite (and PostgreSQL with --postgres URL, a database it may wipe),
`--runs` times each.  Counted: failed drivers, configurations simulated more than once,
jobs whose results are not their own space.

Prints a table and, with --json, the figures as JSON.  Linux only (reads /proc).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from sqlalchemy import text

from search._db import DatabaseError, open_database
from search._db.store import job_state
from search._spec import load_spec

LLMCAP = str(Path(sys.executable).parent / "llmcap")
LEASE_S = 3.0
SPEC = {
    "name": "reliability",
    "model": "meta-llama/Llama-2-7b-hf",
    "skus": ["a100-80gb", "h100-sxm"],
    "workload": {"source": "chat", "num_requests": 400},
    "budget": {"max_gpus": 2},
    "space": {
        "tp": [1, 2],
        "schedulers": {"sarathi": {"batch_size": [64], "chunk_size": [512]}, "vllm": {}},
    },
    "slo": {
        "filters": [
            {"metric": "ttft", "percentile": 90, "max_s": 2},
            {"metric": "tbt", "percentile": 99, "max_s": 0.2},
        ]
    },
    "capacity": {"tolerance": 0.3, "refine_tolerance": 0.02},
}
COMPARED = ["capacity_qps", "capacity_upper_qps", "tolerance", "slo_passed", "ttft_p90"]
POINTS = ("1 done", "3 done", "5 done", "7 done", "refining")


def _env() -> dict[str, str]:
    return {**os.environ, "LLMCAP_LEASE_S": str(LEASE_S), "COLUMNS": "200"}


def _write_spec(directory: Path, **overrides) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "spec.yaml"
    path.write_text(yaml.safe_dump({**SPEC, **overrides}))
    return path


def _start(spec: Path, db_url: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [LLMCAP, "search", "run", str(spec), "--db", db_url, "--executor", "local",
         "--workers", "1", *extra],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip


def _results(db_url: str, job_id: int | None = None):
    frame = open_database(db_url).results(job_id, status="done")
    return frame.set_index("fingerprint").sort_index()


def _session_alive(session: int) -> list[int]:
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z" and int(fields[3]) == session:
                alive.append(int(entry.name))
    return alive


def _reached(db_url: str, point: str) -> bool:
    try:
        frame = open_database(db_url).results(None)
    except DatabaseError:
        return False
    if point == "refining":
        return bool(frame["refine_to"].notna().any())
    return int((frame["status"] == "done").sum()) >= int(point.split()[0])


def kill_tests(work: Path) -> dict:
    spec = _write_spec(work / "spec")
    reference_url = f"sqlite:///{work / 'reference.db'}"
    done = subprocess.run(
        [LLMCAP, "search", "run", str(spec), "--db", reference_url, "--executor", "local",
         "--workers", "1"], env=_env(), capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"the reference run failed:\n{done.stderr}")
    reference = _results(reference_url)
    rows = []
    for sig, target in (("SIGKILL", "driver"), ("SIGTERM", "driver"), ("SIGINT", "group")):
        for point in POINTS:
            slug = point.replace(" ", "-")
            url = f"sqlite:///{work / f'{sig}-{slug}.db'}"
            driver = _start(spec, url)
            deadline = time.monotonic() + 300
            while not _reached(url, point) and driver.poll() is None:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            if driver.poll() is not None:
                rows.append({"signal": sig, "point": point, "error": "finished before the point"})
                continue
            before = _results(url, 1)
            signum = getattr(signal, sig)
            if target == "group":
                os.killpg(driver.pid, signum)
            else:
                os.kill(driver.pid, signum)
            driver.communicate(timeout=120)
            deadline = time.monotonic() + 20
            while _session_alive(driver.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            workers_left = len(_session_alive(driver.pid))
            if sig == "SIGKILL":
                time.sleep(LEASE_S + 0.5)
            expected = "interrupted" if sig == "SIGKILL" else "cancelled"
            state = job_state(open_database(url).get_job(1), lease_s=LEASE_S)
            resumed = subprocess.run(
                [LLMCAP, "search", "run", str(spec), "--db", url, "--executor", "local",
                 "--workers", "1", "--resume", "1"], env=_env(), capture_output=True, text=True,
            )  # fmt: skip
            after = _results(url, 1)
            kept = after.reindex(before.index)
            lost = int(
                (
                    kept["capacity_qps"].isna()
                    | (
                        (kept["tolerance"] == before["tolerance"])
                        & (kept["capacity_qps"] != before["capacity_qps"])
                    )
                ).sum()
            )
            with open_database(url).engine.connect() as connection:
                stored = connection.execute(text("SELECT count(*) FROM capacity_results")).scalar()
                configs = connection.execute(text("SELECT count(*) FROM configurations")).scalar()
            evaluated_again = int(
                re.search(r"(\d+) evaluated", resumed.stdout).group(1)
            ) if resumed.returncode == 0 else -1  # fmt: skip
            differs = (
                len(after) != len(reference)
                or not after[COMPARED].equals(reference[COMPARED])
            )  # fmt: skip
            rows.append({
                "signal": sig, "point": point, "done_before": len(before),
                "state": state, "state_ok": state == expected,
                "workers_left": workers_left, "resume_ok": resumed.returncode == 0,
                "lost": lost, "duplicated": max(0, int(stored) - int(configs))
                + max(0, evaluated_again - (len(reference) - len(before))),
                "differs_from_reference": bool(differs),
                "final_job_state": open_database(url).get_job(1).status,
            })  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    return {"reference_configurations": len(reference), "runs": rows}


def concurrent_tests(work: Path, runs: int, postgres: str | None) -> dict:
    same = _write_spec(work / "same")
    other = _write_spec(work / "other", skus=["a100-80gb"], workload={
        "source": "chat", "num_requests": 300})  # fmt: skip
    backends = [("sqlite", None)] + ([("postgresql", postgres)] if postgres else [])
    rows = []
    for backend, url in backends:
        for mode in ("same spec", "different specs"):
            for run in range(runs):
                if backend == "sqlite":
                    slug = mode.replace(" ", "-")
                    db_url = f"sqlite:///{work / f'{slug}-{run}.db'}"
                else:
                    db_url = url
                    _wipe(url)
                specs = (same, same) if mode == "same spec" else (same, other)
                drivers = [_start(spec, db_url) for spec in specs]
                outputs = [(*d.communicate(timeout=600), d.returncode) for d in drivers]
                failed = sum(code != 0 for _, _, code in outputs)
                evaluated = sum(
                    int(m.group(1)) for out, _, _ in outputs
                    if (m := re.search(r"(\d+) evaluated", out))
                )  # fmt: skip
                db = open_database(db_url)
                with db.engine.connect() as connection:
                    stored = connection.execute(
                        text("SELECT count(*) FROM capacity_results")
                    ).scalar()
                skus_of = {load_spec(spec).fingerprint(): set(load_spec(spec).skus)
                           for spec in specs}  # fmt: skip
                wrong_scope = sum(
                    not set(db.results(job.id)["sku"]) <= skus_of[job.spec_fingerprint]
                    for job in db.list_jobs()
                )
                db.close()
                rows.append({
                    "backend": backend, "mode": mode, "run": run, "failed_drivers": failed,
                    "duplicate_simulations": max(0, evaluated - int(stored)),
                    "wrong_scope": wrong_scope,
                    "errors": [err.strip().splitlines()[-1] for _, err, code in outputs
                               if code != 0 and err.strip()],
                })  # fmt: skip
                print(json.dumps(rows[-1]), flush=True)
    return {"runs": rows}


def _wipe(url: str) -> None:
    from sqlalchemy import MetaData, create_engine

    engine = create_engine(url)
    with engine.begin() as connection:
        metadata = MetaData()
        metadata.reflect(connection)
        metadata.drop_all(connection)
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("kill", help="kill -9 / SIGTERM / SIGINT at five points, then resume")
    concurrent = sub.add_parser("concurrent", help="two drivers on one database")
    concurrent.add_argument("--runs", type=int, default=10)
    concurrent.add_argument("--postgres", default=os.environ.get("LLMCAP_TEST_POSTGRES_URL"),
                            help="a PostgreSQL URL the benchmark may wipe")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="llmcap-reliability-") as tmp:
        work = Path(tmp)
        if args.command == "kill":
            figures = kill_tests(work)
            runs = figures["runs"]
            summary = {
                "runs": len(runs),
                "results_lost": sum(r.get("lost", 0) for r in runs),
                "duplicated": sum(r.get("duplicated", 0) for r in runs),
                "differ_from_uninterrupted": sum(r.get("differs_from_reference", 0) for r in runs),
                "wrong_job_states": sum(not r.get("state_ok", False) for r in runs),
                "workers_left_behind": sum(r.get("workers_left", 0) for r in runs),
                "resumes_failed": sum(not r.get("resume_ok", False) for r in runs),
            }
        else:
            figures = concurrent_tests(work, args.runs, args.postgres)
            runs = figures["runs"]
            summary = {}
            for backend in sorted({r["backend"] for r in runs}):
                for mode in ("same spec", "different specs"):
                    group = [r for r in runs if r["backend"] == backend and r["mode"] == mode]
                    summary[f"{backend}, {mode}"] = {
                        "runs": len(group),
                        "failed_drivers": sum(r["failed_drivers"] for r in group),
                        "duplicate_simulations": sum(r["duplicate_simulations"] for r in group),
                        "wrong_scope": sum(r["wrong_scope"] for r in group),
                    }
    print(json.dumps(summary if not args.json else {"summary": summary, **figures}, indent=2))


if __name__ == "__main__":
    main()
