"""The services' own write path refuses a stale write: ``save_run`` is guarded by the version
the run was read with, ``save_step`` by the status the step was read with. Two copies of one
row, read before either wrote (as two processes would without the row lock), each move on;
the second write raises ``ConcurrentTransition`` and leaves the first one's row as it was."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.utils import timezone
from django_fsm import ConcurrentTransition

from runs.models import Run, Step
from runs.statuses import RunStatus, StepStatus
from runs.store import rows
from runs.transitions import save_run, save_step
from testsupport.factories import make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(operator, held_messages) -> Run:
    return make_run(operator, goal="guarded", steps=[{"tool": "echo", "args": {"value": 1}}])


def _stored(model, pk):
    return model.objects.filter(pk=pk).values().get()


def test_a_run_saved_from_a_stale_version_is_refused(run):
    first, second = rows.get(Run, run.pk), rows.get(Run, run.pk)
    first.start()
    with transaction.atomic():
        save_run(first)
    after_first = _stored(Run, run.pk)
    second.cancel(error={"type": "cancelled", "message": "late"})
    with pytest.raises(ConcurrentTransition), transaction.atomic():
        save_run(second)
    assert _stored(Run, run.pk) == after_first
    assert after_first["status"] == RunStatus.RUNNING


def test_a_step_saved_from_a_stale_status_is_refused(run):
    step_id = run.steps.get().pk
    first, second = rows.get(Step, step_id), rows.get(Step, step_id)
    first.enqueue()
    with transaction.atomic():
        save_step(first, status_was=StepStatus.PENDING)
    after_first = _stored(Step, step_id)
    second.cancel(now=timezone.now())
    with pytest.raises(ConcurrentTransition), transaction.atomic():
        save_step(second, status_was=StepStatus.PENDING)
    assert _stored(Step, step_id) == after_first
    assert after_first["status"] == StepStatus.QUEUED
