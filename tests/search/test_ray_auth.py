"""Ray 2.60 token authentication: used when the user has a token, explained when not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from search._ray_auth import AUTH_HINT, token_auth_from_environment, token_available

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ray/auth_token
    return tmp_path


def test_no_token_no_mode(clean_env) -> None:
    assert not token_available()
    token_auth_from_environment()
    assert "RAY_AUTH_MODE" not in os.environ


@pytest.mark.parametrize("source", ["variable", "path", "home file"])
def test_a_token_turns_token_mode_on(clean_env, monkeypatch, source) -> None:
    if source == "variable":
        monkeypatch.setenv("RAY_AUTH_TOKEN", "secret")
    elif source == "path":
        token = clean_env / "token"
        token.write_text("secret")
        monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    else:
        (clean_env / ".ray").mkdir()
        (clean_env / ".ray" / "auth_token").write_text("secret")
    assert token_available()
    token_auth_from_environment()
    assert os.environ["RAY_AUTH_MODE"] == "token"


def test_a_chosen_mode_is_kept(clean_env, monkeypatch) -> None:
    monkeypatch.setenv("RAY_AUTH_TOKEN", "secret")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    token_auth_from_environment()
    assert os.environ["RAY_AUTH_MODE"] == "disabled"


def test_jobs_api_error_says_how_to_authenticate(clean_env) -> None:
    pytest.importorskip("ray")
    from search._ray_jobs import RayJobsError, _client

    with pytest.raises(RayJobsError) as info:
        _client("http://127.0.0.1:9")  # nothing listens there
    message = str(info.value)
    assert "cannot reach the Ray Jobs API at http://127.0.0.1:9" in message
    assert AUTH_HINT in message


def test_a_missing_job_agent_names_the_port_and_how_to_pick_another(monkeypatch) -> None:
    pytest.importorskip("ray")
    import search._ray_jobs as ray_jobs

    class AgentNeverUp:
        def submit_job(self, **_):
            raise RuntimeError("No available agent to submit job, please try again later.")

    monkeypatch.setattr(ray_jobs, "_client", lambda address: AgentNeverUp())
    monkeypatch.setattr(ray_jobs, "AGENT_WAIT_S", 0.0)
    with pytest.raises(ray_jobs.RayJobsError) as info:
        ray_jobs.submit_job("http://127.0.0.1:8265", "llmcap --help", ROOT)
    message = str(info.value)
    assert "no job agent after 0 s" in message and "52365" in message
    assert "--dashboard-agent-listen-port" in message and "ray stop" in message
