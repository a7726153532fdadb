"""The one error type of the workloads package."""

from __future__ import annotations


class WorkloadError(ValueError):
    """A workload cannot be built: bad parameters, a bad length spec or an unreadable trace.

    The message is meant for the user as it is (one sentence naming the field or file, the
    value and what is allowed); the CLI prints it without a traceback.
    """
