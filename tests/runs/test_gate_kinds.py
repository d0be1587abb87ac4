"""A second gate kind, defined only here, works through the executor without any change to it.

The "ticket" gate holds a step until a test says yes or no. It is registered at run time like
an app registers its kind in ``AppConfig.ready``; everything else (waiting, queueing after
"yes", the refusal the step sees after "no", cancel, expiry, the shown statuses and the audit
events) is the executor's own code.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import tests.tools  # noqa: F401  (registers the test tools)
from agentops.actors import Actor
from audit.models import AuditEvent
from audit.services import audited_atomic
from runs import gates
from runs.control.lifecycle import run_cancel
from runs.executor.gates import gate_refused_locked, gate_satisfied_locked
from runs.gates import Classification, StepRequest
from runs.models import Run, Step
from runs.recovery import sweep
from runs.statuses import RunStatus, StepStatus
from runs.tools import Validator
from runs.transitions import lock_run, lock_step
from tests.tools import CALLS
from testsupport.factories import plan_run

pytestmark = pytest.mark.django_db

TICKET = "ticket"


class TicketGate:
    """Opens a "ticket" per step; ``expired`` names the steps whose tickets time out."""

    name = TICKET
    waiting_status = "awaiting_ticket"
    waiting_label = "Awaiting a ticket"

    def __init__(self) -> None:
        self.opened: list[int] = []
        self.cancelled: list[int] = []
        self.expired: list[int] = []

    def open(self, *, run: Run, step: Step, actor: Actor) -> None:
        assert step.status == StepStatus.WAITING
        self.opened.append(step.pk)

    def cancel(self, *, run: Run, step: Step, actor: Actor) -> None:
        self.cancelled.append(step.pk)

    def expire_due(self, *, actor: Actor) -> int:
        for step_id in self.expired:
            with audited_atomic():
                run = lock_run(Step.objects.get(pk=step_id).run_id)
                step = lock_step(step_id)
                gate_refused_locked(
                    run=run,
                    step=step,
                    actor=actor,
                    error={"type": "ticket_expired", "message": "x"},
                )
        count, self.expired = len(self.expired), []
        return count


class TicketPolicy:
    """Sends every ``test_count`` call to the ticket gate; the rest wait nowhere."""

    def classify(self, requests: list[StepRequest]) -> list[Classification]:
        return [
            Classification("low", TICKET, {"queue": "qa"})
            if r.tool == "test_count"
            else Classification("low")
            for r in requests
        ]

    def escalate(
        self, request: StepRequest, current: Classification, reason: str
    ) -> Classification | None:
        return None

    def validators(self, request: StepRequest) -> tuple[Validator, ...]:
        return ()


@pytest.fixture
def ticket_gate() -> Iterator[TicketGate]:
    kind = TicketGate()
    previous = gates.step_policy()
    gates.register(kind)
    gates.set_step_policy(TicketPolicy())
    yield kind
    gates.set_step_policy(previous)
    gates.unregister(TICKET)


@pytest.fixture
def waiting_run(ticket_gate, operator, django_capture_on_commit_callbacks) -> Run:
    CALLS.clear()
    steps = [
        {"tool": "echo", "args": {"value": 1}},
        {"tool": "test_count", "args": {"n": 1}},
        {"tool": "echo", "args": {"value": 3}},
    ]
    return plan_run(operator, steps, capture=django_capture_on_commit_callbacks, goal="ticketed")


def _decide(run: Run, *, yes: bool, capture: Any, **error: Any) -> None:
    step_id = run.steps.get(index=1).pk
    with capture(execute=True), audited_atomic():
        locked_run, step = lock_run(run.pk), lock_step(step_id)
        if yes:
            gate_satisfied_locked(run=locked_run, step=step, actor=Actor.system("test"))
        else:
            gate_refused_locked(run=locked_run, step=step, actor=Actor.system("test"), error=error)


def _verbs(run: Run) -> list[str]:
    return list(AuditEvent.objects.filter(run_id=run.pk).values_list("verb", flat=True))


def test_a_step_waits_at_a_registered_kind_and_shows_its_status(waiting_run, ticket_gate):
    step = waiting_run.steps.get(index=1)
    assert (waiting_run.status, waiting_run.gate) == (RunStatus.WAITING, TICKET)
    assert (step.status, step.gate, step.gate_params) == (
        StepStatus.WAITING,
        TICKET,
        {"queue": "qa"},
    )
    assert ticket_gate.opened == [step.pk]
    assert CALLS == {}
    assert waiting_run.status_info.value == step.status_info.value == "awaiting_ticket"
    assert "run.awaiting_ticket" in _verbs(waiting_run)
    assert "step.awaiting_ticket" in _verbs(waiting_run)


def test_a_satisfied_gate_lets_the_step_run_once_and_the_run_finish(
    waiting_run, django_capture_on_commit_callbacks
):
    _decide(waiting_run, yes=True, capture=django_capture_on_commit_callbacks)
    waiting_run.refresh_from_db()
    assert waiting_run.status == RunStatus.SUCCEEDED
    assert waiting_run.gate == ""
    step = waiting_run.steps.get(index=1)
    assert {step.idempotency_key: 1} == CALLS
    assert [s.status for s in waiting_run.steps.order_by("index")] == [StepStatus.SUCCEEDED] * 3


def test_a_refused_gate_rejects_the_step_with_the_kinds_error_and_fails_the_plan_run(
    waiting_run, django_capture_on_commit_callbacks
):
    _decide(
        waiting_run,
        yes=False,
        capture=django_capture_on_commit_callbacks,
        type="ticket_closed",
        message="won't fix",
    )
    waiting_run.refresh_from_db()
    steps = list(waiting_run.steps.order_by("index"))
    assert [s.status for s in steps] == [
        StepStatus.SUCCEEDED,
        StepStatus.REJECTED,
        StepStatus.SKIPPED,
    ]
    assert steps[1].error == {"type": "ticket_closed", "message": "won't fix"}
    assert waiting_run.status == RunStatus.FAILED
    assert waiting_run.error == {
        "type": "ticket_closed",
        "message": "won't fix",
        "step": 1,
        "tool": "test_count",
    }
    assert CALLS == {}


def test_cancelling_the_run_cancels_the_gate(
    waiting_run, ticket_gate, operator, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        run_cancel(run_id=waiting_run.pk, actor=Actor.for_user(operator), reason="stop")
    step = waiting_run.steps.get(index=1)
    assert ticket_gate.cancelled == [step.pk]
    assert step.status == StepStatus.CANCELLED
    assert Run.objects.get(pk=waiting_run.pk).status == RunStatus.CANCELLED


def test_the_sweeper_asks_the_kind_to_expire_what_waited_too_long(
    waiting_run, ticket_gate, django_capture_on_commit_callbacks
):
    step = waiting_run.steps.get(index=1)
    ticket_gate.expired.append(step.pk)
    with django_capture_on_commit_callbacks(execute=True):
        counts = sweep(actor=Actor.system("sweeper"))
    assert counts["expired_gates"] == 1
    step.refresh_from_db()
    assert (step.status, step.error["type"]) == (StepStatus.REJECTED, "ticket_expired")
    assert Run.objects.get(pk=waiting_run.pk).status == RunStatus.FAILED
