"""An outage of a service a request can do without (``agentops.outages``) is logged when it
begins and when it ends, never per failure, and the service is not tried for a moment after
each failure; a task sent after a commit is dropped while the broker cannot be reached
(``agentops.celery.send_or_drop``)."""

from __future__ import annotations

import pytest
from kombu.exceptions import OperationalError

from agentops import celery, outages
from agentops.outages import Outage


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(outages.time, "monotonic", clock)
    return clock


def _logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "agentops.outages"]


def test_an_outage_is_logged_once_when_it_begins_and_once_when_it_ends(clock, caplog):
    outage = Outage("the thing", "things go without it", retry_seconds=2)
    assert not outage.skipping()
    outage.failed(ConnectionError("refused"))
    assert outage.skipping()
    clock.now += 1.9
    assert outage.skipping()
    clock.now += 0.2
    assert not outage.skipping()  # time to try again
    outage.failed(ConnectionError("refused again"))  # the same outage: not logged again
    assert outage.skipping()
    clock.now += 60
    outage.reached()
    outage.reached()
    assert not outage.skipping()
    assert _logged(caplog) == [
        "the thing is unreachable (ConnectionError: refused); until it is back things go "
        "without it",
        "the thing is reachable again after 62 s",
    ]
    outage.failed(TimeoutError("slow"))  # a new outage
    assert len(_logged(caplog)) == 3


def test_a_task_is_dropped_while_the_broker_cannot_be_reached(monkeypatch, clock, caplog):
    monkeypatch.setattr(celery, "BROKER", Outage("the broker", "tasks are dropped"))
    tried: list[tuple[object, ...]] = []

    class Task:
        def apply_async(self, args: tuple[object, ...], **options: object) -> None:
            tried.append(args)
            raise OperationalError("Error 111 connecting")

    celery.send_or_drop(Task(), (1,))
    celery.send_or_drop(Task(), (2,))
    assert tried == [(1,)]  # the second did not wait on the broker
    assert len(_logged(caplog)) == 1
