"""``runs.transitions.transition``: one call moves a locked run or step by its FSM transition,
takes the status (and gate) it had itself, writes the row guarded by what it was read with and
records the audit event from that status. A stale copy is refused and changes nothing."""

from __future__ import annotations

import pytest
from django.utils import timezone
from django_fsm import ConcurrentTransition

from agentops.actors import Actor
from audit.models import AuditEvent
from audit.services import audited_atomic
from runs.models import Run, Step
from runs.statuses import RunStatus, StepStatus
from runs.transitions import lock_run, lock_step, transition
from testsupport.factories import make_run
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(operator, held_messages) -> Run:
    return make_run(operator, goal="transition", steps=[{"tool": "echo", "args": {"value": 1}}])


def test_a_step_transition_takes_its_old_status_writes_it_and_audits_it(run):
    actor = Actor.worker()
    step_id = run.steps.get().pk
    with audited_atomic():
        lock_run(run.pk)
        step = lock_step(step_id)
        was = transition(step, "enqueue", actor=actor, payload={"why": "test"})
    assert was == StepStatus.PENDING
    assert Step.objects.get(pk=step_id).status == StepStatus.QUEUED
    event = AuditEvent.objects.filter(object_type="step", object_id=str(step_id)).latest("id")
    assert (event.verb, event.from_state, event.to_state) == ("step.queued", "pending", "queued")
    assert event.payload == {"why": "test"}


def test_a_run_leaving_a_gate_is_audited_from_the_gate_it_waited_at(run):
    Run.objects.filter(pk=run.pk).update(status=RunStatus.WAITING, gate="approval")
    with audited_atomic():
        locked = lock_run(run.pk)
        transition(locked, "unblock", actor=Actor.worker())
    event = AuditEvent.objects.filter(object_type="run", verb="run.running").latest("id")
    assert event.from_state == "awaiting_approval"
    assert Run.objects.get(pk=run.pk).gate == ""


def test_a_stale_step_is_refused_and_nothing_changes(run):
    step_id = run.steps.get().pk
    with audited_atomic():
        stale = lock_step(step_id)
    Step.objects.filter(pk=step_id).update(status=StepStatus.SKIPPED)
    events = AuditEvent.objects.count()
    with (
        assert_unchanged(live_streams=False),
        pytest.raises(ConcurrentTransition),
        audited_atomic(),
    ):
        transition(stale, "cancel", actor=Actor.worker(), now=timezone.now())
    assert AuditEvent.objects.count() == events
    assert Step.objects.get(pk=step_id).status == StepStatus.SKIPPED
