"""The search driver: expand, check, evaluate on an executor, store, rank, build frontiers.

Only drivers write the database.  Configurations are keyed by the spec's
fingerprint, so running a spec again, or resuming after a crash, evaluates only
what is not done yet; the same configuration is never simulated twice.  A job's
answers cover its own configurations (its space within its budget) only.

Several drivers may share a database: each claims a configuration before it
evaluates it (a lease its heartbeat thread renews), waits for the ones another
live driver holds, and takes over the claims of a driver that died.  The job row
carries the heartbeat, so a killed driver's job shows as interrupted.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import optuna

from search._capacity import LatencySLO, first_requests
from search._capacity_kind import CAPACITY_CEILING
from search._db import (
    MAX_ATTEMPTS,
    ConfigRecord,
    Database,
    DatabaseError,
    ResultRecord,
    StoredConfiguration,
)
from search._db.store import job_state, lease_seconds
from search._errors import SpecError
from search._evaluate import Evaluation, EvaluationTask, evaluate
from search._executors import Executor, ExecutorKind, make_executor
from search._pareto import (
    FRONTIERS,
    best_configuration,
    job_frontier,
    refinement_contenders,
)
from search._space import Candidate, ConfigPoint, candidates
from search._spec import SearchSpec, search_workload
from search._strategy import (
    constraint_value,
    enqueue_grid,
    make_study,
    objective_values,
    params_of,
    suggest,
)
from search._zero_load import zero_load_headroom
from simulator import prepare, service_bound
from workloads import Workload

# spec fields that do not change what a job is (a guard on the space's size)
_NOT_DECIDING = frozenset({"max_configurations"})
POLL_S = 1.0  # how often a driver looks at configurations another driver is evaluating


class JobCancelled(Exception):
    """The driver was asked to stop (SIGTERM, as `search cancel` and Ray's job stop send)."""


@dataclass(slots=True)
class JobProgress:
    """What the progress display shows."""

    total: int = 0
    done: int = 0
    running: int = 0
    failed: int = 0
    cached: int = 0  # finished by an earlier job of the same spec
    best_qps_per_dollar: float = 0.0
    best_label: str = ""


@dataclass(slots=True)
class JobReport:
    job_id: int
    status: str
    evaluated: int = 0
    cached: int = 0
    failed: int = 0
    infeasible: int = 0
    over_budget: int = 0
    refined: int = 0  # results searched again, finer, because they could change the best
    simulations: int = 0
    wall_time_s: float = 0.0
    errors: list[str] = field(default_factory=list)
    shared: int = 0  # evaluated by another driver of the same spec while this one ran
    smallest_over_budget: int | None = None  # GPUs of the smallest over-budget configuration
    # configurations not searched to the end because they cannot be the best
    # (`strategy.prune`): "label: why" each
    pruned: list[str] = field(default_factory=list)


def _record(candidate: Candidate) -> ConfigRecord:
    p = candidate.point
    return ConfigRecord(
        fingerprint=candidate.fingerprint,
        sku=p.sku,
        tp=p.tp,
        pp=p.pp,
        replicas=p.replicas,
        scheduler=p.scheduler,
        batch_size=p.batch_size,
        chunk_size=p.chunk_size,
        max_tokens=p.max_tokens,
        precision=p.precision,
        engine=p.engine,
        num_gpus=p.num_gpus,
        cost_per_hour=candidate.cost_per_hour,
        params=p.as_dict() | {"label": p.label()},
        feasible=candidate.feasible,
        infeasible_reason=candidate.infeasible_reason,
    )


def _latency_slo(slo) -> LatencySLO:
    return LatencySLO(slo.metric, slo.percentile, slo.max_s)


def _result_record(metrics: dict) -> ResultRecord:
    known = set(ResultRecord.__dataclass_fields__)
    values = {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v)
        for k, v in metrics.items()
        if k in known
    }
    return ResultRecord(**values)


class SearchDriver:
    """Runs one search job to completion (or until interrupted)."""

    def __init__(
        self,
        spec: SearchSpec,
        db: Database,
        executor_kind: ExecutorKind = "ray",
        address: str | None = None,
        workers: int | None = None,
        on_progress: Callable[[JobProgress], None] | None = None,
    ) -> None:
        self.spec = spec
        self.db = db
        self.executor_kind = executor_kind
        self.address = address
        self.workers = workers
        self.on_progress = on_progress or (lambda progress: None)
        self.spec_fingerprint = spec.fingerprint()
        self.progress = JobProgress()
        self.driver_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_s = lease_seconds()
        self._executor: Executor | None = None
        # pruned configurations (`strategy.prune`): the best QPS per dollar each was held to
        # (0.0: pruned whatever the best), and why
        self._pruned: dict[int, tuple[float, str]] = {}

    def _executor_started(self) -> Executor:
        """The executor, started on first use (a job with nothing to simulate starts none)."""
        if self._executor is None:
            self._executor = make_executor(self.executor_kind, evaluate, self.address, self.workers)
        return self._executor

    # -- setup -------------------------------------------------------------

    def _register(self, job_id: int) -> tuple[dict[str, StoredConfiguration], JobReport]:
        """Register the job's configurations: its space, within its budget."""
        report = JobReport(job_id, "running")
        in_budget: list[Candidate] = []
        for candidate in candidates(self.spec):
            reason = candidate.infeasible_reason
            if reason is not None and reason.startswith("budget:"):
                report.over_budget += 1  # outside this job's space, not a property of the config
                gpus = candidate.point.num_gpus
                if report.smallest_over_budget is None or gpus < report.smallest_over_budget:
                    report.smallest_over_budget = gpus
                continue
            in_budget.append(candidate)
        ids = self.db.register_configurations(
            job_id, self.spec_fingerprint, [_record(c) for c in in_budget]
        )
        stored = {
            c.fingerprint: s
            for c, s in zip(in_budget, self.db.get_configurations(ids), strict=True)
        }
        report.infeasible = sum(1 for s in stored.values() if s.status == "infeasible")
        return stored, report

    def _workload(self) -> Workload:
        """The spec's workload, as long as a capacity search may lengthen it (its first
        `workload.num_requests` requests are the ones every search starts on)."""
        return search_workload(self.spec, self.spec.max_requests)

    def _task(
        self,
        stored: StoredConfiguration,
        workload: Workload,
        prune_below_qps: float | None = None,
        hint_qps: float | None = None,
    ) -> EvaluationTask:
        return EvaluationTask(
            configuration_id=stored.id,
            deployment=_point(stored).deployment(self.spec),
            workload=workload,
            capacity_slo=_latency_slo(self.spec.slo.capacity),
            filters=tuple(_latency_slo(s) for s in self.spec.slo.filters),
            capacity_meets_filters=self.spec.slo.capacity_meets_filters,
            tolerance=self.spec.capacity.tolerance,
            max_simulations=self.spec.capacity.max_simulations,
            num_requests=self.spec.workload.num_requests,
            max_rejected_share=self.spec.slo.max_rejected_share,
            prune_below_qps=prune_below_qps,
            refine_tolerance=self.spec.capacity.refine_tolerance,
            hint_qps=hint_qps,
        )

    # -- the job -----------------------------------------------------------

    def run(self, job_id: int | None = None) -> JobReport:
        """Run a new job, or resume `job_id` (which must be a job of the same spec)."""
        if job_id is None:
            job_id = self.db.create_job(
                self.spec.name, self.spec.model_dump_json(), self.spec_fingerprint
            ).id
        else:
            self.check_resumable(job_id)
        self.db.start_job(job_id, driver=self.driver_id)
        started = time.perf_counter()
        try:
            with _Heartbeat(self.db, job_id, self.driver_id, self.lease_s):
                try:
                    report = self._run(job_id)
                finally:
                    self._release_claims()
        except KeyboardInterrupt:
            self.db.finish_job(job_id, "cancelled", "interrupted (Ctrl-C)")
            raise
        except JobCancelled:
            self.db.finish_job(job_id, "cancelled", "stopped (SIGTERM: search cancel or a kill)")
            raise
        except BaseException as exc:
            self.db.finish_job(job_id, "failed", f"{type(exc).__name__}: {exc}")
            raise
        report.wall_time_s = time.perf_counter() - started
        report.status = "succeeded"
        self.store_frontiers(job_id)
        error = "; ".join(report.errors[:3]) if report.errors else None
        self.db.finish_job(job_id, report.status, error)
        return report

    def check_resumable(self, job_id: int) -> None:
        """A job is resumed only by the spec it was created with (its space, budget, SLOs...)."""
        job = self.db.get_job(job_id)
        stored = json.loads(job.spec)
        current = json.loads(self.spec.model_dump_json())
        differing = sorted(
            key
            for key in stored.keys() | current.keys()
            if key not in _NOT_DECIDING and stored.get(key) != current.get(key)
        )
        if job.spec_fingerprint != self.spec_fingerprint and not differing:
            differing = ["workload (the trace file's content)"]
        if job_state(job, lease_s=self.lease_s) == "running":
            raise SpecError(
                f"--resume {job_id}: job {job_id} is running (driver {job.driver}, alive): "
                f"run the spec without --resume to share its work, or cancel it first"
            )
        if differing:
            raise SpecError(
                f"--resume {job_id}: job {job_id} ({job.name!r}) was created with another spec "
                f"(it differs in {', '.join(differing)}); resume it with its own spec, or run "
                f"this spec as a new job (leave --resume out: finished results are reused)"
            )

    def _release_claims(self) -> None:
        with contextlib.suppress(DatabaseError):  # else the claims expire with the lease
            self.db.release_claims(self.driver_id)

    def _run(self, job_id: int) -> JobReport:
        stored, report = self._register(job_id)
        workload = self._workload()
        by_id = {s.id: s for s in stored.values()}
        try:
            self._explore(job_id, stored, report, workload)
            self._refine(job_id, by_id, report, workload)
            # pruning held configurations to the best of the moment; refining may have
            # lowered it (the best failed a filter at its finer capacity): check those again
            while again := self._pruned_above(self._floor(self._finished_results(job_id))):
                for cid in again:
                    del self._pruned[cid]
                self._explore(job_id, {k: s for k, s in stored.items() if s.id in again},
                              report, workload, as_grid=True)  # fmt: skip
                self._refine(job_id, by_id, report, workload)
            report.pruned = [f"{_label(by_id[c])}: {why}" for c, (_, why) in self._pruned.items()]
        finally:
            if self._executor is not None:
                self._executor.close()
                self._executor = None
        return report

    def _floor(self, results: dict[int, dict]) -> float:
        """The best measured QPS per dollar meeting the SLOs (0.0: none), or -1.0 when the
        job does not prune."""
        if not self.spec.strategy.prune:
            return -1.0
        return max(
            (
                float(m.get("qps_per_dollar") or 0.0)
                for m in results.values()
                if m.get("slo_passed") and m.get("capacity_kind") != CAPACITY_CEILING
            ),
            default=0.0,
        )

    def _promise(self, stored: StoredConfiguration, workload: Workload) -> tuple[float, float]:
        """How likely the configuration is to be the best, to search the likeliest first: the
        headroom its filters leave at zero load (`zero_load_headroom`: a best must meet them
        at its capacity), then the steady-state bound on its QPS per dollar."""
        prepared = prepare(_point(stored).deployment(self.spec))
        head = first_requests(workload, self.spec.workload.num_requests)
        filters = [(s.metric, s.percentile, s.max_s) for s in self.spec.slo.filters]
        cost = stored.record.cost_per_hour
        bound = service_bound(prepared, head).steady_qps / cost if cost > 0 else 0.0
        return zero_load_headroom(prepared, head, filters), bound

    def _pruned_above(self, floor: float) -> set[int]:
        """Pruned configurations held to a best higher than `floor`."""
        return {cid for cid, (held, _) in self._pruned.items() if held > floor * (1 + 1e-9)}

    def _claim(self, configuration_id: int, *statuses: str) -> bool:
        return self.db.claim(configuration_id, self.driver_id, self.lease_s, statuses=statuses)

    def _explore(
        self,
        job_id: int,
        stored: dict[str, StoredConfiguration],
        report: JobReport,
        workload: Workload,
        *,
        as_grid: bool = False,
    ) -> None:
        """Evaluate the strategy's configurations, each to the spec's tolerance (`as_grid`:
        every one of `stored`, whatever the strategy).

        With `strategy.prune`, each is first held to the best found so far
        (`search._capacity.PruneCheck`): one that cannot beat it is left unsearched.

        A configuration another live driver has claimed is not simulated here: its trials
        wait (`_collect_elsewhere`) until that driver records it, or its claim expires.
        """
        by_point = {_point(s): s for s in stored.values()}
        by_id = {s.id: s for s in stored.values()}
        study = make_study(self.spec)
        feasible = [s for s in stored.values() if s.status != "infeasible"]
        if self.spec.strategy.prune:  # the most promising first: the best held to rises fast
            promise = {s.id: self._promise(s, workload) for s in feasible}
            feasible.sort(key=lambda s: promise[s.id], reverse=True)
        if self.spec.strategy.kind == "grid" or as_grid:
            budget = enqueue_grid(study, (_point(s) for s in feasible))
        else:
            budget = self.spec.strategy.trials or len(feasible)
        self.progress.total = budget
        results = self._finished_results(job_id)
        trials: dict[int, tuple[optuna.Trial, StoredConfiguration]] = {}
        attempts: dict[int, int] = {}
        elsewhere: dict[int, list[optuna.Trial]] = {}  # claimed by another driver
        asked = 0
        simulated_this_job: set[int] = set()
        # a sampler that asks for a configuration this job has already visited spends no
        # trial of the budget: it is told the known answer, and the next trial is a random
        # configuration not yet visited (`enqueue_trial`), until none is left
        visited: set[ConfigPoint] = set()
        unvisited = sorted((p for p, s in by_point.items() if s.status != "infeasible"), key=str)
        rng = random.Random(self.spec.strategy.seed)
        held: dict[int, float] = {}  # the best QPS per dollar each task was held to

        def start(target: StoredConfiguration, trial: optuna.Trial) -> None:
            executor = self._executor_started()
            simulated_this_job.add(target.id)
            trials[target.id] = (trial, target)
            attempts[target.id] = 1
            floor = self._floor(results)
            prune_qps = floor * target.record.cost_per_hour if floor >= 0 else None
            held[target.id] = floor
            # a job that searches every configuration starts each at its nearest finished
            # neighbour's capacity (the same deployment but its batch cap or chunk size)
            hint = None if prune_qps is not None else _neighbour_capacity(target, by_id, results)
            executor.submit(target.id, self._task(target, workload, prune_qps, hint))
            self.progress.running += 1
            self.on_progress(self.progress)

        while True:
            # fill the executor with new trials
            executor = self._executor
            while asked < budget and (executor is None or executor.in_flight() < executor.slots):
                trial = study.ask()
                point = suggest(trial, self.spec)
                target = by_point.get(point)
                if point in visited:
                    self._tell_repeat(study, trial, results.get(target.id) if target else None)
                    unvisited = [p for p in unvisited if p not in visited]
                    if not unvisited:  # the whole space is visited: nothing left to ask
                        budget = asked
                        self.progress.total = self.progress.done + self.progress.running
                        continue
                    study.enqueue_trial(params_of(unvisited.pop(rng.randrange(len(unvisited)))))
                    continue
                visited.add(point)
                asked += 1
                if target is None or target.status == "infeasible":
                    self._tell(study, trial, None)
                    self._advance()
                    continue
                if target.id in results:  # done earlier: reuse, never re-simulate
                    self._reuse(study, trial, results[target.id], target, report)
                    continue
                if target.id in elsewhere or not self._claim(target.id, "pending", "failed"):
                    elsewhere.setdefault(target.id, []).append(trial)
                    continue
                start(target, trial)
                executor = self._executor
            if executor is None or executor.in_flight() == 0:
                if not elsewhere:
                    return
                time.sleep(POLL_S)
                self._collect_elsewhere(elsewhere, study, results, by_id, report, start, job_id)
                continue
            for finished in executor.wait_any():
                cid = finished.key
                trial, target = trials[cid]
                if finished.error is not None:
                    message = _error_text(finished.error)
                    self.db.record_failure(cid, message)  # counts the attempt, ends the claim
                    if attempts[cid] < MAX_ATTEMPTS and self._claim(cid, "failed"):
                        attempts[cid] += 1
                        executor.submit(cid, self._task(target, workload))
                        held.pop(cid, None)
                        continue
                    report.failed += 1
                    report.errors.append(f"{_label(target)}: {message.splitlines()[-1]}")
                    self.progress.failed += 1
                    self.progress.running -= 1
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    self.on_progress(self.progress)
                    continue
                evaluation: Evaluation = finished.result
                report.simulations += int(evaluation.metrics.get("num_simulations", 0))
                if "pruned" in evaluation.metrics:  # cannot be the best: nothing stored
                    self.db.release_claim(cid, self.driver_id)
                    by_best = bool(evaluation.metrics.get("pruned_by_best"))
                    self._pruned[cid] = (held[cid] if by_best else 0.0,
                                         str(evaluation.metrics["pruned"]))  # fmt: skip
                    self.progress.running -= 1
                    self._tell(study, trial, None)
                    self._advance()
                    continue
                self.db.record_result(cid, _result_record(evaluation.metrics))
                results[cid] = evaluation.metrics
                report.evaluated += 1
                self.progress.running -= 1
                self._tell(study, trial, evaluation.metrics)
                self._advance(evaluation.metrics, _label(target))
            if elsewhere:
                self._collect_elsewhere(elsewhere, study, results, by_id, report, start, job_id)

    def _collect_elsewhere(
        self,
        elsewhere: dict[int, list[optuna.Trial]],
        study: optuna.Study,
        results: dict[int, dict],
        by_id: dict[int, StoredConfiguration],
        report: JobReport,
        start: Callable[[StoredConfiguration, optuna.Trial], None],
        job_id: int,
    ) -> None:
        """Trials waiting on another driver: take the results it recorded; take over the
        configurations whose claim it let go (it failed them, or it died)."""
        current = {s.id: s for s in self.db.get_configurations(list(elsewhere))}
        if any(s.status == "done" for s in current.values()):
            results.update(self._finished_results(job_id))
        for cid, waiting in list(elsewhere.items()):
            status = current[cid]
            if status.status == "done" and cid in results:
                for trial in waiting:
                    self._reuse(study, trial, results[cid], by_id[cid], report, shared=True)
                del elsewhere[cid]
            elif status.status == "failed" and status.attempts >= MAX_ATTEMPTS:
                del elsewhere[cid]  # the other driver gave up on it: so does this one
                report.failed += 1
                report.errors.append(f"{_label(by_id[cid])}: {status.error or 'failed'}")
                self.progress.failed += 1
                for trial in waiting:
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                self.on_progress(self.progress)
            elif self._claim(cid, "pending", "failed"):
                del elsewhere[cid]
                first, *others = waiting
                start(by_id[cid], first)
                for trial in others:
                    self._tell(study, trial, None)
                    self._advance()

    def _reuse(
        self,
        study: optuna.Study,
        trial: optuna.Trial,
        metrics: dict,
        target: StoredConfiguration,
        report: JobReport,
        *,
        shared: bool = False,
    ) -> None:
        """A trial answered by a stored result (an earlier job's, or another driver's)."""
        self._tell(study, trial, metrics)
        self.progress.cached += 1
        if shared:
            report.shared += 1
        else:
            report.cached += 1
        self._advance(metrics, _label(target))

    def _refine(
        self,
        job_id: int,
        stored: dict[int, StoredConfiguration],
        report: JobReport,
        workload: Workload,
    ) -> None:
        """Search again, to the refine tolerance, every result that could change the best.

        Rounds until `refinement_contenders` is empty: refining one result can lower the
        floor (the best fails its filters at a finer capacity) and bring in others.  A
        round's refinements are marked in the database before they start, so a job resumed
        after a kill first finishes the marked ones: it makes the refinements an
        uninterrupted run makes.  Each refinement starts from the coarse bracket, so it
        costs only the bisection; its simulations and time add to the result's.  A
        refinement that fails keeps the coarse result (the failure is reported, the
        configuration stays done).  One another driver is refining is waited for.
        """
        fine = self.spec.capacity.refine_tolerance
        if not self.spec.capacity.refines or fine is None:
            return
        given_up: set[int] = set()  # refinements that failed here
        while True:
            frame = self.db.results(job_id, status="done")
            self._show_best(frame, stored)  # refining may have unseated the best so far
            due = [c for c in _marked_for_refinement(frame) if c not in given_up]
            if not due:
                due = [c for c in refinement_contenders(frame, fine) if c not in given_up]
                if not due:
                    return
                self.db.mark_refinement(due, fine)
            claimed = [cid for cid in due if self._claim(cid, "done")]
            if not claimed:  # all being refined by another driver
                time.sleep(POLL_S)
                continue
            self.progress.total += len(claimed)
            given_up.update(self._refine_round(claimed, frame, stored, report, workload, fine))

    def _refine_round(
        self,
        claimed: list[int],
        frame,
        stored: dict[int, StoredConfiguration],
        report: JobReport,
        workload: Workload,
        fine: float,
    ) -> list[int]:
        """Refine the claimed configurations; returns those whose refinement failed."""
        rows = frame.set_index("configuration_id")
        executor = self._executor_started()
        queue = list(reversed(claimed))  # most promising first
        failed: list[int] = []
        while queue or executor.in_flight():
            while queue and executor.in_flight() < executor.slots:
                cid = queue.pop()
                coarse = rows.loc[cid]
                task = replace(
                    self._task(stored[cid], workload),
                    tolerance=fine,
                    passing_qps=float(coarse["capacity_qps"]),
                    failing_qps=_finite_or_none(coarse["capacity_upper_qps"]),
                    # the length the coarse search was decided on (it may have lengthened)
                    num_requests=_count_or_none(coarse["num_requests"])
                    or self.spec.workload.num_requests,
                )
                executor.submit(cid, task)
                self.progress.running += 1
                self.on_progress(self.progress)
            for finished in executor.wait_any():
                cid = finished.key
                self.progress.running -= 1
                if finished.error is not None:
                    message = _error_text(finished.error).splitlines()[-1]
                    report.errors.append(f"refining {_label(stored[cid])}: {message}")
                    self.db.clear_refinement([cid])
                    failed.append(cid)
                    self._advance()
                    continue
                metrics = dict(finished.result.metrics)
                coarse = rows.loc[cid]
                if metrics.pop("keeps_coarser_metrics", False):  # only the bracket moved
                    moved = ("capacity_upper_qps", "tolerance", "num_simulations",
                             "wall_time_s")  # fmt: skip
                    metrics = coarse.to_dict() | {k: metrics[k] for k in moved}
                metrics["num_simulations"] += int(coarse["num_simulations"])
                metrics["wall_time_s"] += float(coarse["wall_time_s"])
                self.db.record_result(cid, _result_record(metrics))
                report.refined += 1
                report.simulations += int(finished.result.metrics["num_simulations"])
                self._advance(metrics, _label(stored[cid]))
        self.db.release_claims(self.driver_id)
        return failed

    def _show_best(self, frame, stored: dict[int, StoredConfiguration]) -> None:
        best = best_configuration(frame) if len(frame) else None
        if best is not None:
            self.progress.best_qps_per_dollar = float(best["qps_per_dollar"])
            self.progress.best_label = _label(stored[int(best["configuration_id"])])
            self.on_progress(self.progress)

    def _finished_results(self, job_id: int) -> dict[int, dict]:
        frame = self.db.results(job_id, status="done")
        out: dict[int, dict] = {}
        for row in frame.to_dict("records"):
            out[int(row["configuration_id"])] = row
        return out

    def _tell_repeat(
        self, study: optuna.Study, trial: optuna.Trial, metrics: dict | None
    ) -> None:
        """A configuration the job visited before: its answer again, or, while it is still
        being evaluated, a failed trial (which samplers ignore) rather than a made-up one."""
        if metrics is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            self._tell(study, trial, metrics)

    def _tell(self, study: optuna.Study, trial: optuna.Trial, metrics: dict | None) -> None:
        trial.set_constraint("slo", constraint_value(metrics, self.spec))
        study.tell(trial, list(objective_values(metrics)))

    def _advance(self, metrics: dict | None = None, label: str = "") -> None:
        """One more trial finished (evaluated, reused, or not runnable)."""
        self.progress.done += 1
        # the live "best" is a measured one, as the recommendation is (a capacity resting on
        # the analytic ceiling shows in `_show_best` only when nothing measured passes)
        measured = metrics.get("capacity_kind") != CAPACITY_CEILING if metrics else False
        if metrics and metrics.get("slo_passed") and measured:
            qpd = metrics.get("qps_per_dollar") or 0.0
            if qpd > self.progress.best_qps_per_dollar:
                self.progress.best_qps_per_dollar = qpd
                self.progress.best_label = label
        self.on_progress(self.progress)

    # -- frontiers ---------------------------------------------------------

    def store_frontiers(self, job_id: int) -> None:
        frame = self.db.results(job_id, status="done")
        for frontier in FRONTIERS:
            ids = [int(frame.loc[i, "configuration_id"]) for i in job_frontier(frame, frontier)]
            self.db.replace_pareto(job_id, frontier.name, ids)


class _Heartbeat:
    """A background thread that keeps the driver's job heartbeat and claims alive.

    Not for an in-memory SQLite database: no other process can see it, and its one shared
    connection must not be used from two threads.
    """

    def __init__(self, db: Database, job_id: int, driver: str, lease_s: float) -> None:
        self._beat = lambda: db.heartbeat(job_id, driver, lease_s)
        self._every = lease_s / 6
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._enabled = db.shared_between_processes

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            with contextlib.suppress(DatabaseError):  # unreachable now: the next beat retries
                self._beat()

    def __enter__(self) -> _Heartbeat:
        if self._enabled:
            self._thread = threading.Thread(target=self._loop, name="llmcap-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _point(stored: StoredConfiguration) -> ConfigPoint:
    return ConfigPoint.from_dict(stored.record.params)


def _neighbour_capacity(
    target: StoredConfiguration, by_id: dict[int, StoredConfiguration], results: dict[int, dict]
) -> float | None:
    """The measured capacity of the finished configuration nearest `target` that differs from
    it only in batch cap, chunk size or token limit (None: none is finished)."""
    point = _point(target)
    key = replace(point, batch_size=0, chunk_size=None, max_tokens=None)
    best: tuple[float, float] | None = None
    for cid, metrics in results.items():
        other = by_id.get(cid)
        capacity = metrics.get("capacity_qps") or 0.0
        if other is None or capacity <= 0 or metrics.get("capacity_kind") == CAPACITY_CEILING:
            continue
        near = _point(other)
        if replace(near, batch_size=0, chunk_size=None, max_tokens=None) != key:
            continue
        distance = abs(math.log2(near.batch_size / point.batch_size)) + abs(
            math.log2((near.chunk_size or 1) / (point.chunk_size or 1))
        )
        if best is None or distance < best[0]:
            best = (distance, float(capacity))
    return None if best is None else best[1]


def _label(stored: StoredConfiguration) -> str:
    return str(stored.record.params.get("label", ""))


def _marked_for_refinement(frame) -> list[int]:
    """Configurations with a decided refinement not yet stored, most promising first."""
    if not len(frame):
        return []
    marked = frame[frame["refine_to"].notna()]
    coarse = marked["tolerance"].isna() | (marked["tolerance"] > marked["refine_to"] * (1 + 1e-9))
    marked = marked[coarse].sort_values("capacity_upper_qps", ascending=False, na_position="first")
    return [int(c) for c in marked["configuration_id"]]


def _finite_or_none(value: object) -> float | None:
    number = float(value) if value is not None else math.nan
    return number if math.isfinite(number) else None


def _count_or_none(value: object) -> int | None:
    """A stored count as an int; None where it is missing (None, NaN, NA)."""
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def _error_text(error: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(error), error)).strip()
    return text or repr(error)
