"""Where configuration evaluations run: Ray (default), a local process pool, or inline.

An executor runs one function over task payloads and hands results back as
they finish.  Tasks return plain data; the driver alone writes the database.
Failures come back as exceptions, not raised, so the driver decides on retries.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from search._ray_auth import AUTH_HINT, token_auth_from_environment, token_available

ExecutorKind = Literal["ray", "local", "inline"]
LOOPBACK_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": a local Ray binds to 127.0.0.1
WAIT_SLICE_S = 0.5  # longest a wait for Ray tasks blocks the driver's signal handlers


@dataclass(slots=True)
class Finished:
    key: Any  # what the driver passed to submit
    result: Any | None
    error: BaseException | None


class Executor(Protocol):
    slots: int  # tasks worth keeping in flight

    def submit(self, key: Any, payload: Any) -> None: ...
    def wait_any(self) -> list[Finished]: ...
    def in_flight(self) -> int: ...
    def close(self) -> None: ...


class ExecutorError(Exception):
    """An executor could not start (e.g. an unreachable Ray address); says how to fix it."""


class InlineExecutor:
    """Runs each task in the driver process at submit time (for debugging)."""

    slots = 1

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self._fn = fn
        self._done: list[Finished] = []

    def submit(self, key: Any, payload: Any) -> None:
        try:
            self._done.append(Finished(key, self._fn(payload), None))
        except Exception as exc:  # reported to the driver, which records it
            self._done.append(Finished(key, None, exc))

    def wait_any(self) -> list[Finished]:
        done, self._done = self._done, []
        return done

    def in_flight(self) -> int:
        return len(self._done)

    def close(self) -> None:
        pass


def _end_with_parent() -> None:
    """Pool worker initializer: the worker ends when the driver that started it does.

    On Linux the kernel sends SIGKILL when the parent dies (PR_SET_PDEATHSIG), so a driver
    killed with kill -9 leaves no workers behind; elsewhere a watchdog thread notices the
    parent is gone within a second.
    """
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="llmcap-parent-watch", daemon=True).start()


class ProcessPoolExecutorAdapter:
    """A local process pool, one worker per core (or `workers`); the workers end with the
    driver, whether it finishes, is interrupted, or is killed."""

    def __init__(self, fn: Callable[[Any], Any], workers: int | None = None) -> None:
        import multiprocessing

        self.slots = workers or os.cpu_count() or 1
        self._fn = fn
        self._pool = ProcessPoolExecutor(
            max_workers=self.slots,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_end_with_parent,
        )
        self._futures: dict[Future, Any] = {}

    def submit(self, key: Any, payload: Any) -> None:
        self._futures[self._pool.submit(self._fn, payload)] = key

    def wait_any(self) -> list[Finished]:
        if not self._futures:
            return []
        done, _ = wait_futures(list(self._futures), return_when=FIRST_COMPLETED)
        out = []
        for future in done:
            key = self._futures.pop(future)
            error = future.exception()
            out.append(Finished(key, None if error else future.result(), error))
        return out

    def in_flight(self) -> int:
        return len(self._futures)

    def close(self) -> None:
        """Shut the pool down; tasks still running (the driver was interrupted) are killed,
        not waited for."""
        if self._futures:
            # the pool has no public way to stop a running task: end its worker processes
            for process in list((getattr(self._pool, "_processes", None) or {}).values()):
                process.terminate()
            self._futures.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class RayExecutor:
    """Ray tasks (`ray.remote` + `ray.wait`) on a cluster, or on a local Ray started here."""

    def __init__(self, fn: Callable[[Any], Any], address: str | None = None) -> None:
        if not address:
            # a throwaway local Ray listens on loopback only, not on the machine's network
            # address (Ray reads this when it is first imported)
            os.environ.setdefault(LOOPBACK_ONLY_ENV, "0")
        else:
            token_auth_from_environment()  # a cluster's head wants its token (Ray 2.60)
        import ray

        self._ray = ray
        self._started_here = False
        if not ray.is_initialized():
            try:
                if address:
                    ray.init(address=address, log_to_driver=False)  # token mode: set above
                else:
                    ray.init(address="local", include_dashboard=False, log_to_driver=False)
                    self._started_here = True
            except Exception as exc:
                raise ExecutorError(
                    f"cannot reach the Ray cluster at {address!r}: {_first_line(exc)}. Is `ray "
                    "start --head` running there, and is the address HOST:6379 (or "
                    "ray://HOST:10001, or auto on a cluster node)? "
                    + ("" if token_available() else AUTH_HINT + ". ")
                    + "Use --executor local to run without Ray."
                    if address
                    else f"cannot start a local Ray instance: {exc}. "
                    "Use --executor local to run without Ray."
                ) from None
        self.slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._remote = ray.remote(num_cpus=1, max_retries=0)(fn)
        self._refs: dict[Any, Any] = {}

    def submit(self, key: Any, payload: Any) -> None:
        self._refs[self._remote.remote(payload)] = key

    def wait_any(self) -> list[Finished]:
        if not self._refs:
            return []
        ready: list = []
        while not ready:  # in slices, so a signal (SIGTERM: search cancel) is handled at once
            ready, _ = self._ray.wait(list(self._refs), num_returns=1, timeout=WAIT_SLICE_S)
        out = []
        for ref in ready:
            key = self._refs.pop(ref)
            try:
                out.append(Finished(key, self._ray.get(ref), None))
            except Exception as exc:
                out.append(Finished(key, None, exc))
        return out

    def in_flight(self) -> int:
        return len(self._refs)

    def close(self) -> None:
        for ref in list(self._refs):
            self._ray.cancel(ref, force=True)
        self._refs.clear()
        if self._started_here:
            self._ray.shutdown()


def make_executor(
    kind: ExecutorKind,
    fn: Callable[[Any], Any],
    address: str | None = None,
    workers: int | None = None,
) -> Executor:
    if kind == "ray":
        return RayExecutor(fn, address)
    if kind == "local":
        return ProcessPoolExecutorAdapter(fn, workers)
    if kind == "inline":
        return InlineExecutor(fn)
    raise ValueError(f"unknown executor {kind!r}; allowed: ray, local, inline")
