"""``agentops.fsm.GuardedTransitions``: django-fsm's concurrency guard with the models' FSM
fields computed once per class."""

from __future__ import annotations

import pytest
from django.db import transaction
from django_fsm import ConcurrentTransition, ConcurrentTransitionMixin, FSMFieldMixin

from agentops.fsm import GuardedTransitions
from approvals.models import ApprovalRequest
from runs.models import Run, Step, StepStatus
from testsupport.factories import make_run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("model", [Run, Step, ApprovalRequest])
def test_the_state_fields_are_the_ones_django_fsm_finds(model):
    # The mixin's own property, called on the same instance: what the override must equal.
    instance = model()
    own = ConcurrentTransitionMixin.state_fields.fget(instance)
    found = tuple(instance.state_fields)
    assert found == tuple(own)
    assert found
    assert all(isinstance(field, FSMFieldMixin) for field in found)
    assert isinstance(instance, GuardedTransitions)


def test_an_orm_save_of_a_step_changed_meanwhile_is_still_refused(operator):
    run = make_run(operator, steps=[{"tool": "echo", "args": {"value": "x"}}])
    step = Step.objects.get(run=run)
    step.enqueue()
    Step.objects.filter(pk=step.pk).update(status=StepStatus.CANCELLED)
    with pytest.raises(ConcurrentTransition), transaction.atomic():
        step.save()
    assert Step.objects.get(pk=step.pk).status == StepStatus.CANCELLED
