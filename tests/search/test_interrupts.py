"""A signal's exception never lands inside a database transaction of the main thread."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import text

from search._db import open_database
from search._interrupts import critical_section, raise_or_defer


class Stop(Exception):
    pass


def test_outside_a_critical_section_it_raises_at_once() -> None:
    with pytest.raises(Stop):
        raise_or_defer(Stop())


def test_inside_it_waits_for_the_outermost_exit() -> None:
    steps = []
    with pytest.raises(Stop), critical_section():
        with critical_section():
            raise_or_defer(Stop())  # as a signal handler would, mid-transaction
            steps.append("inner body ran to its end")
        steps.append("outer body ran to its end")
    assert steps == ["inner body ran to its end", "outer body ran to its end"]
    with critical_section():  # nothing left pending
        pass


def test_another_thread_is_not_a_critical_section_of_the_main_one() -> None:
    seen = []

    def worker() -> None:
        with critical_section():
            seen.append("worker inside")

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == ["worker inside"]
    with pytest.raises(Stop):
        raise_or_defer(Stop())  # the worker's section did not defer the main thread


def test_the_database_transactions_are_critical_sections(tmp_path) -> None:
    db = open_database(f"sqlite:///{tmp_path / 'r.db'}")
    with pytest.raises(Stop), db._transaction() as session:
        raise_or_defer(Stop())
        session.execute(text("SELECT 1"))  # the transaction still runs to its end
    # it ended cleanly: another write goes through at once
    job = db.create_job("after", "{}", "fp")
    assert db.get_job(job.id).name == "after"
