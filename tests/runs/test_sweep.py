"""The sweeper re-sends what lost messages left behind and ends what is overdue."""

from datetime import timedelta

import pytest
from django.utils import timezone

from agentops.actors import Actor
from approvals.models import ApprovalStatus
from runs.control.create import run_create
from runs.models import Run, RunStatus, Step, StepStatus
from runs.recovery import sweep
from testsupport.factories import run_awaiting_approval

pytestmark = pytest.mark.django_db


def age(model, **filters):
    model.objects.filter(**filters).update(updated_at=timezone.now() - timedelta(hours=1))


def test_a_run_whose_start_message_was_lost_is_started(
    operator, held_messages, django_capture_on_commit_callbacks
):
    run = run_create(
        actor=Actor.for_user(operator),
        agent="plan",
        goal="lost start",
        steps=[{"tool": "echo", "args": {"value": 1}}],
    )
    age(Run, pk=run.pk)
    with django_capture_on_commit_callbacks(execute=True):
        counts = sweep(actor=Actor.system("sweeper"))
    assert counts["stalled_runs"] == 1
    assert held_messages[-1] == ("runs.advance_run", (str(run.pk),))


def test_a_queued_step_whose_message_was_lost_is_sent_again(
    operator, held_messages, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(
            actor=Actor.for_user(operator),
            agent="plan",
            goal="lost step",
            steps=[{"tool": "echo", "args": {"value": 1}}],
        )
    from runs.executor.entry import run_advance

    with django_capture_on_commit_callbacks(execute=True):
        run_advance(run_id=run.pk, actor=Actor.system())
    step = run.steps.get()
    assert step.status == StepStatus.QUEUED
    age(Step, pk=step.pk)
    held_messages.clear()
    with django_capture_on_commit_callbacks(execute=True):
        counts = sweep(actor=Actor.system("sweeper"))
    assert counts["queued"] == 1
    assert ("runs.execute_step", (step.pk,)) in held_messages


def test_overdue_approvals_expire_and_fail_their_run(operator, django_capture_on_commit_callbacks):
    run = run_awaiting_approval(operator, capture=django_capture_on_commit_callbacks)
    approval = run.steps.get().approval
    type(approval).objects.filter(pk=approval.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    with django_capture_on_commit_callbacks(execute=True):
        counts = sweep(actor=Actor.system("sweeper"))
    assert counts["expired_gates"] == 1
    approval.refresh_from_db()
    run.refresh_from_db()
    assert approval.status == ApprovalStatus.EXPIRED
    assert run.status == RunStatus.FAILED
    assert run.error["type"] == "approval_expired"
    assert run.steps.get().status == StepStatus.REJECTED


def test_a_run_past_its_deadline_fails_and_its_open_steps_are_cancelled(
    operator, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(
            actor=Actor.for_user(operator),
            agent="client",
            goal="idle",
            deadline=timezone.now() + timedelta(hours=1),
        )
    Run.objects.filter(pk=run.pk).update(deadline=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        counts = sweep(actor=Actor.system("sweeper"))
    assert counts["deadlines"] == 1
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert (run.error["type"], run.error["limit"]) == ("budget_exceeded", "deadline")


def test_a_queued_step_is_sent_again_at_most_once_per_requeue_period(
    operator, held_messages, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(
            actor=Actor.for_user(operator),
            agent="plan",
            goal="backlog",
            steps=[{"tool": "echo", "args": {"value": 1}}],
        )
    from runs.executor.entry import run_advance

    with django_capture_on_commit_callbacks(execute=True):
        run_advance(run_id=run.pk, actor=Actor.system())
    age(Step, pk=run.steps.get().pk)
    with django_capture_on_commit_callbacks(execute=True):
        first = sweep(actor=Actor.system("sweeper"))
    with django_capture_on_commit_callbacks(execute=True):
        second = sweep(actor=Actor.system("sweeper"))
    # A step queued behind a long backlog is not lost: re-sending it every sweep would only
    # grow the backlog it waits in.
    assert (first["queued"], second["queued"]) == (1, 0)
