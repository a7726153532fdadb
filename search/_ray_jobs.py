"""Search jobs on a Ray cluster through the Ray Jobs API (the dashboard address, :8265)."""

from __future__ import annotations

import os
import time
from pathlib import Path

AGENT_WAIT_S = 60.0  # how long to wait for a new cluster's job agent


class RayJobsError(Exception):
    """The Ray Jobs API could not be reached or refused; the message says how to fix it."""


def _token_auth_from_environment() -> None:
    """Ray 2.60 clusters require a token by default; a client must opt in to send one.

    When the user has a token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)
    and has not chosen a mode, use token mode.
    """
    if os.environ.get("RAY_AUTH_MODE"):
        return
    token_file = Path(os.environ.get("RAY_AUTH_TOKEN_PATH", Path.home() / ".ray" / "auth_token"))
    if os.environ.get("RAY_AUTH_TOKEN") or token_file.is_file():
        os.environ["RAY_AUTH_MODE"] = "token"


def _client(address: str):
    _token_auth_from_environment()  # before Ray reads its configuration
    from ray.job_submission import JobSubmissionClient

    try:
        return JobSubmissionClient(address)
    except Exception as exc:
        raise RayJobsError(
            f"cannot reach the Ray Jobs API at {address}: {exc}. Give the dashboard address "
            "(http://HEAD:8265) of a cluster started with `ray start --head --dashboard-host ...`; "
            "with token authentication on (Ray's default), set RAY_AUTH_TOKEN or use the token "
            "file the cluster created."
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
            if "try again later" in str(exc) and time.monotonic() < deadline:
                time.sleep(1.0)
                continue
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
