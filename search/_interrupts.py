"""Signals that raise in the main thread, held back while it is inside a database transaction.

SIGTERM (`search cancel`, Ray's job stop, systemd, Kubernetes) stops a search by raising an
exception in the main thread.  Raised in the middle of a transaction (after SQLite's
`BEGIN IMMEDIATE`, before the commit), it would leave that connection holding the write lock
while the driver tries to record the job cancelled on another: a lock wait of 30 s and a
failed cancel.  So a transaction is a critical section: the exception waits for its end.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["critical_section", "raise_or_defer"]

_state = {"depth": 0, "pending": None}


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def critical_section() -> Iterator[None]:
    """While the main thread is inside, `raise_or_defer` keeps its exception for the exit."""
    if not _in_main_thread():
        yield
        return
    _state["depth"] += 1
    try:
        yield
    finally:
        _state["depth"] -= 1
        pending = _state["pending"]
        if _state["depth"] == 0 and pending is not None:
            _state["pending"] = None
            raise pending


def raise_or_defer(error: BaseException) -> None:
    """Raise `error` now (from a signal handler), or at the end of the current critical
    section of the main thread."""
    if _state["depth"] > 0:
        _state["pending"] = error
        return
    raise error
