"""A wake-up that cannot be sent after its transaction committed (the broker down for a moment)
does not turn the committed change into an error: the client gets its answer, the failure is
logged, and the sweeper sends the lost wake-up later (``runs.wakeups``)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone

from agentops.actors import Actor
from runs import recovery, wakeups
from runs.models import Run
from runs.statuses import RunStatus
from testsupport.factories import make_token, token_api

pytestmark = pytest.mark.django_db(transaction=True)


class BrokerDown:
    def execute_step(self, step_id: int) -> None:
        raise ConnectionError("the broker is down")

    def advance_run(self, run_id: uuid.UUID) -> None:
        raise ConnectionError("the broker is down")

    def retry_step(self, step_id: int, delay: float) -> None:
        raise ConnectionError("the broker is down")

    def compact_run(self, run_id: uuid.UUID) -> None:
        raise ConnectionError("the broker is down")

    def compact_session(self, session_id: uuid.UUID) -> None:
        raise ConnectionError("the broker is down")


class Recorded:
    def __init__(self) -> None:
        self.sent: list[tuple[str, object]] = []

    def execute_step(self, step_id: int) -> None:
        self.sent.append(("execute_step", step_id))

    def advance_run(self, run_id: uuid.UUID) -> None:
        self.sent.append(("advance_run", run_id))

    def retry_step(self, step_id: int, delay: float) -> None:
        self.sent.append(("retry_step", step_id))

    def compact_run(self, run_id: uuid.UUID) -> None:
        self.sent.append(("compact_run", run_id))

    def compact_session(self, session_id: uuid.UUID) -> None:
        self.sent.append(("compact_session", session_id))


@pytest.fixture
def sender() -> Iterator[None]:
    installed = wakeups._sender()
    yield
    wakeups.install(installed)


@pytest.mark.usefixtures("sender")
def test_a_run_created_while_the_broker_is_down_is_answered_and_started_later(
    operator, caplog, settings
):
    client = token_api(make_token(operator))
    client.raise_request_exception = False
    wakeups.install(BrokerDown())
    with caplog.at_level(logging.ERROR):
        response = client.post(
            "/api/v1/runs/",
            {
                "agent": "plan",
                "goal": "broker down",
                "steps": [{"tool": "echo", "args": {"value": 1}}],
            },
            format="json",
        )
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert run.status == RunStatus.QUEUED
    assert "the broker is down" in caplog.text

    recorded = Recorded()
    wakeups.install(recorded)
    stale = timezone.now() - timedelta(seconds=settings.AGENTOPS_REQUEUE_AFTER_SECONDS + 1)
    Run.objects.filter(pk=run.pk).update(updated_at=stale)
    counts = recovery.sweep(actor=Actor.system("sweeper"))
    assert counts["stalled_runs"] == 1
    assert recorded.sent == [("advance_run", run.pk)]
