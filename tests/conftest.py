"""Test-session settings shared by every package's tests."""

from __future__ import annotations

import os

# Any Ray the tests start listens on loopback only (read by Ray when it is first imported).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
