"""Search jobs on a Ray cluster through the Ray Jobs API (the dashboard address, :8265)."""

from __future__ import annotations

import time
from pathlib import Path

from search._ray_auth import AUTH_HINT, token_auth_from_environment, token_available

AGENT_WAIT_S = 60.0  # how long to wait for a new cluster's job agent
DEFAULT_AGENT_PORT = 52365  # Ray's dashboard agent (job agent) HTTP port


class RayJobsError(Exception):
    """The Ray Jobs API could not be reached or refused; the message says how to fix it."""


def _client(address: str):
    token_auth_from_environment()  # before Ray reads its configuration
    from ray.job_submission import JobSubmissionClient

    try:
        return JobSubmissionClient(address)
    except Exception as exc:
        raise RayJobsError(
            f"cannot reach the Ray Jobs API at {address}: {exc}. Give the dashboard address "
            "(http://HEAD:8265) of a cluster started with `ray start --head --dashboard-host ...`"
            f"{'' if token_available() else '; ' + AUTH_HINT}."
        ) from None


def submit_job(
    address: str, entrypoint: str, working_dir: Path, env_vars: dict[str, str] | None = None
) -> str:
    """Start `entrypoint` on the cluster with `working_dir` uploaded; returns the Ray job id.

    The entrypoint and `env_vars` are public: the Jobs API (`ray job list`, the dashboard)
    shows both to anyone who can reach the cluster, and Ray's logs on the head hold them.
    Never put a secret in either.
    """
    client = _client(address)
    runtime_env: dict = {"working_dir": str(working_dir)}
    if env_vars:
        runtime_env["env_vars"] = dict(env_vars)
    deadline = time.monotonic() + AGENT_WAIT_S
    while True:
        try:
            return client.submit_job(
                entrypoint=entrypoint,
                runtime_env=runtime_env,
            )
        except Exception as exc:
            # a cluster that has just started has no job agent for a few seconds
            agent_missing = "try again later" in str(exc)
            if agent_missing and time.monotonic() < deadline:
                time.sleep(1.0)
                continue
            if agent_missing:
                raise RayJobsError(
                    f"the Ray cluster at {address} has no job agent after {AGENT_WAIT_S:.0f} s. "
                    f"On a host with another Ray (a stale head, another user's), the agent's "
                    f"port ({DEFAULT_AGENT_PORT} by default) is often taken: stop the other one "
                    "(`ray stop`), or start this head on free ports, e.g. `ray start --head "
                    "--dashboard-agent-listen-port 52400 --dashboard-agent-grpc-port 52401 "
                    "--metrics-export-port 52402`"
                ) from None
            raise RayJobsError(f"the Ray cluster at {address} refused the job: {exc}") from None


def job_status(address: str, job_id: str) -> str:
    return str(_call(address, "get_job_status", job_id))


def job_logs(address: str, job_id: str) -> str:
    return str(_call(address, "get_job_logs", job_id))


def stop_job(address: str, job_id: str) -> str:
    stopped = _call(address, "stop_job", job_id)
    return f"stopping {job_id}" if stopped else f"{job_id} was not running"


def _call(address: str, method: str, job_id: str):
    client = _client(address)
    try:
        return getattr(client, method)(job_id)
    except Exception as exc:
        raise RayJobsError(f"{method.replace('_', ' ')} {job_id} at {address}: {exc}") from None
