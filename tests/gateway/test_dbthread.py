"""The gateway's database thread (``gateway.dbthread``): work queued without waiting runs in
order, is repeated once when its connection failed, and its other failures are logged."""

from __future__ import annotations

import logging
import threading

import pytest
from django.db import OperationalError

from gateway.dbthread import in_database_soon


def _drained() -> None:
    """Wait until the thread took the next work: the callbacks of the work before it (the
    logging of its failure) have run by then."""
    in_database_soon(lambda: None).result(timeout=10)


def test_queued_work_runs_in_order_on_one_thread():
    ran: list[tuple[int, str]] = []
    futures = [
        in_database_soon(lambda i: ran.append((i, threading.current_thread().name)), i=i)
        for i in range(5)
    ]
    for future in futures:
        future.result(timeout=10)
    assert [i for i, _ in ran] == [0, 1, 2, 3, 4]
    assert len({name for _, name in ran}) == 1


def test_work_whose_connection_failed_runs_once_more():
    tries: list[int] = []

    def report(answer: str) -> str:
        tries.append(1)
        if len(tries) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return answer

    assert in_database_soon(report, answer="recorded").result(timeout=10) == "recorded"
    assert len(tries) == 2


def test_work_that_fails_otherwise_runs_once_and_is_logged(caplog):
    tries: list[int] = []

    def refused() -> None:
        tries.append(1)
        raise ValueError("not ready")

    with caplog.at_level(logging.ERROR, logger="gateway.dbthread"):
        future = in_database_soon(refused)
        with pytest.raises(ValueError, match="not ready"):
            future.result(timeout=10)
        _drained()
    assert tries == [1]
    (logged,) = [r for r in caplog.records if r.name == "gateway.dbthread"]
    assert "refused" in logged.getMessage()


def test_work_whose_connection_fails_twice_is_logged(caplog):
    def lost() -> None:
        raise OperationalError("the database system is shutting down")

    with caplog.at_level(logging.ERROR, logger="gateway.dbthread"):
        with pytest.raises(OperationalError):
            in_database_soon(lost).result(timeout=10)
        _drained()
    assert [r.name for r in caplog.records if r.name == "gateway.dbthread"] == ["gateway.dbthread"]
