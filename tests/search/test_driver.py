"""Search jobs end to end: executors, reuse, retries, strategies, frontiers."""

from __future__ import annotations

import pytest

from search._db import open_database
from search._driver import SearchDriver
from search._pareto import best_configuration
from search._spec import load_spec
from tests.search.conftest import TINY_SPEC, write_spec


def run_job(spec_path, db_url, executor="inline", **kwargs):
    spec = load_spec(spec_path)
    db = open_database(db_url)
    return spec, db, SearchDriver(spec, db, executor, **kwargs).run()


def test_grid_on_ray_evaluates_every_feasible_configuration(tiny_spec, db_url, ray_local):
    _, db, report = run_job(tiny_spec, db_url, executor="ray")
    assert report.status == "succeeded" and report.failed == 0
    counts = db.configuration_counts(report.job_id)
    assert counts["done"] == report.evaluated == 8  # 2 SKUs x 2 TP x 2 schedulers
    frame = db.results(report.job_id, status="done")
    assert (frame["capacity_qps"] > 0).all()
    assert (frame["qps_per_dollar"] == frame["capacity_qps"] / frame["cost_per_hour"]).all()
    assert frame["ttft_p90"].notna().all() and frame["tbt_p99"].notna().all()
    points = db.pareto_points(report.job_id)
    # the frontiers run over the configurations that meet the SLOs on a measured capacity
    qualifying = set(frame["configuration_id"][frame["slo_passed"].astype(bool)])
    assert set(points["configuration_id"]) <= qualifying
    if qualifying:
        assert set(points["frontier"]) == {
            "qps_per_dollar-vs-ttft_p90", "qps_per_dollar-vs-tbt_p99"
        }  # fmt: skip
    assert db.get_job(report.job_id).status == "succeeded"


def test_running_a_spec_again_reuses_every_result(tiny_spec, db_url):
    _, db, first = run_job(tiny_spec, db_url)
    _, _, second = run_job(tiny_spec, db_url)
    assert first.evaluated == 8
    assert second.evaluated == 0 and second.cached == 8 and second.simulations == 0
    assert len(db.results(second.job_id, status="done")) == 8  # nothing duplicated


def test_local_pool_and_inline_agree(tmp_path, tiny_spec):
    _, db_a, a = run_job(tiny_spec, f"sqlite:///{tmp_path / 'a.db'}", executor="inline")
    _, db_b, b = run_job(tiny_spec, f"sqlite:///{tmp_path / 'b.db'}", executor="local", workers=2)
    cols = ["fingerprint", "capacity_qps", "ttft_p90", "tbt_p99"]
    fa = db_a.results(a.job_id).sort_values("fingerprint")[cols].reset_index(drop=True)
    fb = db_b.results(b.job_id).sort_values("fingerprint")[cols].reset_index(drop=True)
    assert fa.equals(fb)


def test_a_failing_task_is_retried_once_then_recorded(tiny_spec, db_url, monkeypatch):
    import search._driver as driver_module

    calls: dict[int, int] = {}
    real = driver_module.evaluate

    def flaky(task):
        calls[task.configuration_id] = calls.get(task.configuration_id, 0) + 1
        if task.deployment.sku.id == "h100-sxm" and task.deployment.tp == 2:
            raise RuntimeError("worker lost")
        if task.configuration_id == 1 and calls[1] == 1:
            raise RuntimeError("transient")
        return real(task)

    monkeypatch.setattr(driver_module, "evaluate", flaky)
    spec, db, report = run_job(tiny_spec, db_url)
    assert report.failed == 2  # both h100 TP2 configurations, after two attempts each
    assert report.evaluated == 6  # configuration 1 succeeded on its retry
    failed = [c for c in db.configurations(spec.fingerprint()) if c.status == "failed"]
    assert len(failed) == 2 and all(c.attempts == 2 and "worker lost" in c.error for c in failed)
    assert calls[1] == 2
    assert db.get_job(report.job_id).status == "succeeded"


def test_infeasible_and_over_budget_configurations_are_dropped_with_reasons(tmp_path):
    path = write_spec(
        tmp_path,
        model="meta-llama/Llama-2-70b-hf",
        skus=["a100-80gb"],
        budget={"max_gpus": 4},
        space={"tp": [1, 2, 4, 8], "schedulers": {"vllm": {}}},
    )
    spec, db, report = run_job(path, f"sqlite:///{tmp_path / 'r.db'}")
    assert report.over_budget == 1  # TP8 > 4 GPUs: outside this job's space
    infeasible = [c for c in db.configurations(spec.fingerprint()) if c.status == "infeasible"]
    assert len(infeasible) == 1 and infeasible[0].record.tp == 1
    assert "memory" in infeasible[0].record.infeasible_reason
    assert report.evaluated == 2


@pytest.mark.parametrize("kind", ["tpe", "nsga2"])
def test_samplers_never_simulate_a_configuration_twice(tmp_path, kind, monkeypatch):
    import search._evaluate as evaluate_module

    explored: list[int] = []  # first evaluations (refinements continue a bracket)
    simulated: list[tuple[int, float, int]] = []  # (configuration, rate, requests) simulated
    real = evaluate_module.find_capacity
    current: list[int] = []

    def recording(prepared, workload, options, **kwargs):
        found = real(prepared, workload, options, **kwargs)
        simulated.extend((current[-1], p.qps, p.num_requests) for p in found.probes)
        return found

    real_evaluate = evaluate_module.evaluate

    def counting(task):
        current.append(task.configuration_id)
        if task.passing_qps is None:
            explored.append(task.configuration_id)
        return real_evaluate(task)

    monkeypatch.setattr(evaluate_module, "find_capacity", recording)
    monkeypatch.setattr("search._driver.evaluate", counting)
    path = write_spec(tmp_path, strategy={"kind": kind, "trials": 14, "seed": 3})
    _, db, report = run_job(path, f"sqlite:///{tmp_path / 'r.db'}")
    assert len(explored) == len(set(explored)) == report.evaluated
    assert len(simulated) == len(set(simulated)) == report.simulations
    # a repeat spends no trial: 14 trials on an 8-configuration space visit all 8, then stop
    assert report.evaluated == 8 and report.cached == 0
    assert db.configuration_counts(report.job_id)["done"] == report.evaluated


def test_a_sampler_budget_counts_distinct_configurations(tmp_path):
    path = write_spec(tmp_path, strategy={"kind": "tpe", "trials": 5, "seed": 1})
    _, _, report = run_job(path, f"sqlite:///{tmp_path / 'r.db'}")
    assert report.evaluated + report.cached == 5  # five different configurations, no repeats


def test_capacity_can_be_bound_by_the_slo_filters(tmp_path):
    strict = {
        "filters": [{"metric": "ttft", "percentile": 90, "max_s": 0.5}],
        "capacity_meets_filters": True,
        "max_rejected_share": 0.05,  # vLLM's default token limit refuses a few chat requests
    }
    loose = {**strict, "capacity_meets_filters": False}
    _, db_b, bound = run_job(write_spec(tmp_path, slo=strict), f"sqlite:///{tmp_path / 'b.db'}")
    _, db_l, free = run_job(write_spec(tmp_path, slo=loose), f"sqlite:///{tmp_path / 'l.db'}")
    b = db_b.results(bound.job_id)
    f = db_l.results(free.job_id)
    served = b[b["capacity_qps"] > 0]
    assert len(served) and (served["ttft_p90"] < 0.5).all() and served["slo_passed"].all()
    # bounding by the filter never raises a capacity; here it lowers some
    assert b["capacity_qps"].sum() < f["capacity_qps"].sum()


def test_refinement_gives_the_best_of_a_search_at_the_fine_tolerance(tmp_path):

    slo = {**TINY_SPEC["slo"], "capacity_meets_filters": True}  # every served one passes
    coarse = {"tolerance": 0.3, "refine_tolerance": 0.02}
    spec_c = write_spec(tmp_path, capacity=coarse, slo=slo)
    _, db, report = run_job(spec_c, f"sqlite:///{tmp_path}/c.db")
    assert report.refined >= 1
    frame = db.results(report.job_id, status="done")
    refined = frame[frame["tolerance"] == 0.02]
    assert len(refined) == report.refined
    bracketed = refined.dropna(subset=["capacity_upper_qps"])  # the others: at the ceiling
    assert len(bracketed)
    assert (bracketed["capacity_upper_qps"] / bracketed["capacity_qps"] - 1 <= 0.02 + 1e-9).all()
    untouched = frame[frame["tolerance"] == 0.3]
    assert len(untouched) + len(refined) == report.evaluated  # the others kept their bracket

    fine = {"tolerance": 0.02, "refine_tolerance": None}
    spec_f = write_spec(tmp_path, capacity=fine, slo=slo)
    _, db_f, report_f = run_job(spec_f, f"sqlite:///{tmp_path}/f.db")
    assert report_f.refined == 0
    best = best_configuration(frame)
    best_fine = best_configuration(db_f.results(report_f.job_id, status="done"))
    assert best["params"] == best_fine["params"]
    assert best["qps_per_dollar"] == pytest.approx(best_fine["qps_per_dollar"], rel=0.02)

    # a second run finds the recommendation settled: nothing to refine, nothing simulated
    spec_c = write_spec(tmp_path, capacity=coarse, slo=slo)
    _, _, again = run_job(spec_c, f"sqlite:///{tmp_path}/c.db")
    assert again.refined == 0 and again.simulations == 0


def test_each_job_answers_for_its_own_space_and_budget(tmp_path):
    db_url = f"sqlite:///{tmp_path / 'r.db'}"
    _, db, wide = run_job(write_spec(tmp_path), db_url)
    narrow_dir = tmp_path / "narrow"
    narrow_dir.mkdir()
    _, _, narrow = run_job(write_spec(narrow_dir, skus=["a100-80gb"]), db_url)
    assert narrow.status == "succeeded" and narrow.cached == 4 and narrow.evaluated == 0
    frame = db.results(narrow.job_id)
    assert len(frame) == 4 and set(frame["sku"]) == {"a100-80gb"}
    assert (frame["job_id"] == narrow.job_id).all()  # the job asked about, in exports too
    assert (frame["registered_by_job"] == wide.job_id).all()  # reused, not re-simulated
    best = best_configuration(frame)
    assert best is None or best["sku"] == "a100-80gb"
    for frontier in db.pareto_points(narrow.job_id).groupby("frontier"):
        assert set(frontier[1]["sku"]) <= {"a100-80gb"}
    assert len(db.results(wide.job_id)) == 8  # the wide job's answers are unchanged

    one_gpu = tmp_path / "one"
    one_gpu.mkdir()
    _, _, small = run_job(write_spec(one_gpu, budget={"max_gpus": 1}), db_url)
    frame = db.results(small.job_id)
    assert len(frame) == 4 and (frame["num_gpus"] == 1).all()


def test_a_job_over_budget_says_so(tmp_path):
    from search._results_view import why_no_recommendation

    spec, db, report = run_job(
        write_spec(tmp_path, budget={"max_gpus": 1}, space={"tp": [2]}),
        f"sqlite:///{tmp_path / 'r.db'}",
    )
    assert report.over_budget == 2 and report.evaluated == 0
    reason = why_no_recommendation(db, report.job_id, spec)
    assert "budget" in reason and "max_gpus 1" in reason and "needs 2 GPUs" in reason


def test_resume_refuses_another_spec_and_a_job_still_running(tmp_path):
    from search._errors import SpecError

    db_url = f"sqlite:///{tmp_path / 'r.db'}"
    _, db, first = run_job(write_spec(tmp_path), db_url)
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    other = load_spec(write_spec(other_dir, skus=["a100-80gb"]))
    with pytest.raises(SpecError, match=r"another spec \(it differs in skus\)"):
        SearchDriver(other, db, "inline").run(first.job_id)
    same = load_spec(write_spec(tmp_path))
    db.start_job(first.job_id, driver="elsewhere:1:x")  # a live driver holds it
    with pytest.raises(SpecError, match="is running"):
        SearchDriver(same, db, "inline").check_resumable(first.job_id)


def test_grid_over_expert_parallelism_evaluates_every_feasible_configuration(tmp_path, db_url):
    """EP 1 configurations are asked for as such (their trials name ep=1); none is left
    pending when the job succeeds."""
    spec_path = write_spec(
        tmp_path, name="moe", engine="vllm", model="Qwen/Qwen3-30B-A3B", skus=["h100-sxm"],
        budget={"max_gpus": 2}, workload={"source": "chat", "num_requests": 100},
        space={"tp": [1, 2], "ep": [1, 2], "schedulers": {"sarathi": {"batch_size": [64]}}},
    )  # fmt: skip
    _, db, report = run_job(spec_path, db_url)
    assert report.status == "succeeded" and report.failed == 0
    counts = db.configuration_counts(report.job_id)
    assert counts.get("pending", 0) == 0
    assert counts["done"] == report.evaluated == 3  # TP1, TP2, TP2 EP2 (TP1 EP2: infeasible)
    assert counts["infeasible"] == 1


def test_grid_over_attention_data_parallelism_evaluates_every_feasible_configuration(
    tmp_path, db_url
):
    """Every trial names its dp: DP 1 configurations are asked for as such, none left
    pending; DP 2 ones run on DP x TP GPUs."""
    spec_path = write_spec(
        tmp_path, name="moe-dp", engine="vllm", model="Qwen/Qwen3-30B-A3B", skus=["h100-sxm"],
        budget={"max_gpus": 2}, workload={"source": "chat", "num_requests": 100},
        space={"tp": [1], "ep": [1, 2], "dp": [1, 2],
               "schedulers": {"sarathi": {"batch_size": [64]}}},
    )  # fmt: skip
    _, db, report = run_job(spec_path, db_url)
    assert report.status == "succeeded" and report.failed == 0
    counts = db.configuration_counts(report.job_id)
    assert counts.get("pending", 0) == 0
    assert counts["done"] == report.evaluated == 3  # DP1, DP2, DP2 EP2 (DP1 EP2: infeasible)
    assert counts["infeasible"] == 1
    stored = db.configurations(load_spec(spec_path).fingerprint())
    labels = {c.record.params["label"]: c.record.num_gpus for c in stored}
    assert [n for label, n in labels.items() if label.startswith("h100-sxm DP2 TP1 PP1 EP2")] == [2]
