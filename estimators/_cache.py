"""Where llmcap keeps fitted artefacts between runs (regressors, leave-one-out fits)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir() -> Path:
    """``$LLMCAP_CACHE_DIR``, else ``~/.cache/llmcap`` (created by whoever writes there)."""
    root = os.environ.get("LLMCAP_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "llmcap"
