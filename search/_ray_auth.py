"""Token authentication with a Ray 2.60 cluster, the same for `search run --address` (a Ray
client) and `search submit` (the Jobs API).

Ray 2.60 heads require a token by default, and a client sends one only in token mode.  When
the user has a token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, or the file `ray start` writes,
~/.ray/auth_token) and has not chosen a mode, token mode is turned on for them.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["AUTH_HINT", "token_auth_from_environment", "token_available"]

AUTH_HINT = (
    "a Ray 2.60 head requires a token by default: set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) "
    "to the cluster's token, or copy the head's ~/.ray/auth_token here; for a throwaway "
    "cluster started with RAY_AUTH_MODE=disabled, set RAY_AUTH_MODE=disabled here too"
)


def _token_file() -> Path:
    return Path(os.environ.get("RAY_AUTH_TOKEN_PATH", Path.home() / ".ray" / "auth_token"))


def token_available() -> bool:
    """Whether this process has a Ray token to send (variable or file)."""
    return bool(os.environ.get("RAY_AUTH_TOKEN")) or _token_file().is_file()


def token_auth_from_environment() -> None:
    """Turn Ray's token mode on when a token is available and no mode was chosen (call it
    before Ray reads its configuration: before `ray.init` or the Jobs client)."""
    if not os.environ.get("RAY_AUTH_MODE") and token_available():
        os.environ["RAY_AUTH_MODE"] = "token"
