"""Compensating an airline run: it books (and adds bags), then fails; compensation reverts
the writes last first, each approved by a reviewer, and the airline data is back as it was
before the run, row for row; a worker killed in the middle of a compensating call is
recovered and each compensating call takes effect once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

import tests.examples.airline_workers  # noqa: F401  (registers the airline tools)
from agentops import celery_app
from agentops.actors import Actor
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import approval_decide
from examples.airline import tools
from examples.airline.store import Store
from runs.control.compensation import run_compensate
from runs.control.create import run_create
from runs.models import Run, RunStatus, Step, StepAttempt, ToolCall
from runs.recovery import sweep
from runs.statuses import AttemptStatus, StepStatus
from tests.conftest import Worker
from tests.examples.airline_workers import world_of
from tests.examples.test_airline_replay import AIRLINE_DSN, DATA
from testsupport.processes import wait_until

pytestmark = pytest.mark.django_db

LEASE_MARGIN_SECONDS = 1
# τ-bench task 0's booking (trial 0): paid with a certificate, which booking deletes.
BOOKING = {
    "user_id": "mia_li_3668",
    "origin": "JFK",
    "destination": "SEA",
    "flight_type": "one_way",
    "cabin": "economy",
    "flights": [
        {"flight_number": "HAT136", "date": "2024-05-20"},
        {"flight_number": "HAT039", "date": "2024-05-20"},
    ],
    "passengers": [{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}],
    "payment_methods": [
        {"payment_id": "certificate_7504069", "amount": 250},
        {"payment_id": "credit_card_4421486", "amount": 55},
    ],
    "total_baggages": 3,
    "nonfree_baggages": 1,
    "insurance": "no",
}
BAGS = {
    "reservation_id": "HATHAT",
    "total_baggages": 4,
    "nonfree_baggages": 2,
    "payment_id": "credit_card_4421486",
}
BOOK = {"tool": "book_reservation", "args": BOOKING}
ADD_BAGS = {"tool": "update_reservation_baggages", "args": BAGS}
CRASH = {"tool": "test_crash", "args": {}}


@pytest.fixture(scope="module")
def store() -> Iterator[Store]:
    opened = Store(AIRLINE_DSN, DATA)
    yield opened
    opened.close()


def rows(store: Store, world: str) -> list[tuple[str, str, str]]:
    """Every document row of ``world`` as stored (kind, key, JSON text), in order."""
    with store.pool.connection() as conn:
        found = conn.execute(
            "SELECT kind, key, doc FROM airline_doc WHERE world = %s ORDER BY kind, key", [world]
        )
        return [(str(kind), str(key), str(doc)) for kind, key, doc in found]


def airline_run(user: Any, steps: list[dict[str, Any]]) -> Run:
    """A plan run of airline ``steps`` on a world of its own (``world_of``)."""
    return run_create(actor=Actor.for_user(user), agent="plan", goal="book, then fail", steps=steps)


def approve_next(run: Run, reviewer: Any, capture: Any = None) -> Step:
    """Approve the run's pending approval request; returns its step."""
    approval = ApprovalRequest.objects.get(step__run=run, status=ApprovalStatus.PENDING)
    actor = Actor.for_user(reviewer)
    if capture is None:
        approval_decide(approval_id=approval.pk, actor=actor, decision="approve")
    else:
        with capture(execute=True):
            approval_decide(approval_id=approval.pk, actor=actor, decision="approve")
    return approval.step


def test_a_failed_booking_run_compensated_leaves_the_airline_data_as_before(
    operator, reviewer, store, django_capture_on_commit_callbacks
):
    before = rows(store, store.template)
    capture = django_capture_on_commit_callbacks
    with capture(execute=True):
        run = airline_run(operator, [BOOK, ADD_BAGS, CRASH])
    world = world_of(run.pk)
    approve_next(run, reviewer, capture)
    approve_next(run, reviewer, capture)
    assert Run.objects.get(pk=run.pk).status == RunStatus.FAILED
    assert rows(store, world) != before

    with capture(execute=True):
        run_compensate(run_id=run.pk, actor=Actor.for_user(operator))
    # Each compensating call waits for a reviewer, as any airline write does.
    undo_bags = approve_next(run, reviewer, capture)
    undo_booking = approve_next(run, reviewer, capture)

    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.COMPENSATED
    assert (undo_bags.compensates.index, undo_booking.compensates.index) == (1, 0)
    assert rows(store, world) == before
    assert [tool for _key, tool, _output in store.effects(world)] == [
        "book_reservation",
        "update_reservation_baggages",
        "revert_write",
        "revert_write",
    ]
    results = [Step.objects.get(pk=s.pk).result for s in (undo_bags, undo_booking)]
    assert results == [
        f"Reverted update_reservation_baggages {run.steps.get(index=1).idempotency_key}: "
        "1 documents restored.",
        f"Reverted book_reservation {run.steps.get(index=0).idempotency_key}: "
        "2 documents restored.",
    ]


def test_a_revert_refuses_when_the_data_changed_since_and_changes_nothing(
    operator, reviewer, store, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    with capture(execute=True):
        run = airline_run(operator, [BOOK, CRASH])
    world = world_of(run.pk)
    approve_next(run, reviewer, capture)
    # Someone else changes the booking afterwards (outside the run).
    tools.call(store, world, "update_reservation_baggages", BAGS, idempotency_key="elsewhere")
    changed = rows(store, world)
    with capture(execute=True):
        run_compensate(run_id=run.pk, actor=Actor.for_user(operator))
    approve_next(run, reviewer, capture)
    run = Run.objects.get(pk=run.pk)
    # The revert answered with an error: the step completed as a tool error, and the run's
    # compensation did not undo what it could not.
    undo = run.steps.get(compensates__index=0)
    assert undo.tool_error is True
    assert undo.result.startswith("Error: reservations/HATHAT changed since")
    assert rows(store, world) == changed


@pytest.fixture
def airline_worker(tmp_path, transactional_db, seeded, only_this_tests_workers) -> Iterator[Worker]:
    """A worker running the airline tools that pauses after each revert took effect."""
    worker = Worker(
        tmp_path / "worker.log",
        concurrency=1,
        include="tests.examples.airline_workers",
        AGENTOPS_LEASE_MARGIN_SECONDS=str(LEASE_MARGIN_SECONDS),
        AIRLINE_PAUSE_AFTER_REVERT_SECONDS="4.5",  # PAUSE_AFTER_REVERT
    )
    celery_app.conf.task_always_eager = False
    yield worker
    celery_app.conf.task_always_eager = True
    worker.stop()


def _status(run: Run, *statuses: str) -> Run | None:
    return Run.objects.filter(pk=run.pk, status__in=statuses).first()


@pytest.mark.worker
def test_a_worker_killed_while_compensating_is_recovered_and_each_revert_acts_once(
    airline_worker, operator, reviewer, store, tmp_path
):
    before = rows(store, store.template)
    run = airline_run(operator, [BOOK, CRASH])
    world = world_of(run.pk)
    wait_until(lambda: ApprovalRequest.objects.filter(step__run=run).exists(), 60, "the gate")
    approve_next(run, reviewer)
    wait_until(lambda: _status(run, RunStatus.FAILED), 60, "the run to fail")

    run_compensate(run_id=run.pk, actor=Actor.for_user(operator))
    undo = approve_next(run, reviewer)

    def reverted() -> bool:
        # The revert took effect, and its worker is pausing before it answers.
        return any(key == undo.idempotency_key for key, _tool, _out in store.effects(world))

    wait_until(reverted, 60, "the revert to take effect")
    assert Step.objects.get(pk=undo.pk).status == StepStatus.RUNNING
    airline_worker.crash()
    with override_settings(AGENTOPS_LEASE_MARGIN_SECONDS=LEASE_MARGIN_SECONDS):
        wait_until(
            lambda: Step.objects.get(pk=undo.pk).lease_expires_at < timezone.now(), 30, "lease"
        )
        assert sweep(actor=Actor.system("sweeper"))["lost"] == 1
    replacement = Worker(
        tmp_path / "replacement.log",
        concurrency=1,
        include="tests.examples.airline_workers",
        purge=False,
    )
    try:
        wait_until(lambda: _status(run, RunStatus.COMPENSATED), 60, "the compensation")
    finally:
        replacement.stop()

    lost, again = StepAttempt.objects.filter(step=undo).order_by("number")
    assert (lost.status, lost.error["type"]) == (AttemptStatus.LOST, "worker_lost")
    assert again.status == AttemptStatus.SUCCEEDED
    # The second call found the revert recorded under its key and did not act again: had it
    # acted, the booking would no longer be as the booking left it and it would have refused.
    undo = Step.objects.get(pk=undo.pk)
    assert undo.result == (
        f"Reverted book_reservation {run.steps.get(index=0).idempotency_key}: 2 documents restored."
    )
    assert ToolCall.objects.get(idempotency_key=undo.idempotency_key).status == "succeeded"
    effects = [(key, tool) for key, tool, _output in store.effects(world)]
    assert effects == [
        (run.steps.get(index=0).idempotency_key, "book_reservation"),
        (undo.idempotency_key, "revert_write"),
    ]
    assert rows(store, world) == before
