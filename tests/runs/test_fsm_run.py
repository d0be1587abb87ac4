"""The run state machine: every allowed move, every forbidden one (for a run that is
compensating and one that is not), protection and races."""

from __future__ import annotations

import pytest
from django.db import transaction
from django_fsm import ConcurrentTransition, TransitionNotAllowed

from runs.models import Run, RunStatus
from testsupport.factories import run_row

pytestmark = pytest.mark.django_db

ERROR = {"type": "test", "message": "test"}
KWARGS: dict[str, dict[str, object]] = {
    "fail": {"error": ERROR},
    "fail_compensation": {"error": ERROR},
    "cancel": {"error": ERROR},
    "wait": {"gate": "approval"},
}
METHODS = [
    "start",
    "wait",
    "unblock",
    "succeed",
    "fail",
    "cancel",
    "resume",
    "compensate",
    "finish_compensation",
    "fail_compensation",
]
# (source, method) → target, as ARCHITECTURE.md's run state model says.
ALLOWED = {
    (RunStatus.QUEUED, "start"): RunStatus.RUNNING,
    (RunStatus.RUNNING, "wait"): RunStatus.WAITING,
    (RunStatus.WAITING, "unblock"): RunStatus.RUNNING,
    (RunStatus.RUNNING, "succeed"): RunStatus.SUCCEEDED,
    (RunStatus.RUNNING, "fail"): RunStatus.FAILED,
    (RunStatus.WAITING, "fail"): RunStatus.FAILED,
    (RunStatus.QUEUED, "cancel"): RunStatus.CANCELLED,
    (RunStatus.RUNNING, "cancel"): RunStatus.CANCELLED,
    (RunStatus.WAITING, "cancel"): RunStatus.CANCELLED,
    (RunStatus.FAILED, "resume"): RunStatus.RUNNING,
    (RunStatus.FAILED, "compensate"): RunStatus.RUNNING,
    (RunStatus.CANCELLED, "compensate"): RunStatus.RUNNING,
}
# The moves of a compensating run (``Run.compensating``): it ends compensated or
# compensation_failed, never succeeded, failed or cancelled, and compensates once.
ALLOWED_COMPENSATING = {
    (RunStatus.RUNNING, "wait"): RunStatus.WAITING,
    (RunStatus.WAITING, "unblock"): RunStatus.RUNNING,
    (RunStatus.QUEUED, "start"): RunStatus.RUNNING,
    (RunStatus.FAILED, "resume"): RunStatus.RUNNING,
    (RunStatus.RUNNING, "finish_compensation"): RunStatus.COMPENSATED,
    (RunStatus.RUNNING, "fail_compensation"): RunStatus.COMPENSATION_FAILED,
    (RunStatus.WAITING, "fail_compensation"): RunStatus.COMPENSATION_FAILED,
}
FORBIDDEN = [
    (status, method)
    for status in RunStatus.values
    for method in METHODS
    if (status, method) not in ALLOWED
]
FORBIDDEN_COMPENSATING = [
    (status, method)
    for status in RunStatus.values
    for method in METHODS
    if (status, method) not in ALLOWED_COMPENSATING
]


def call(run: Run, method: str) -> None:
    getattr(run, method)(**KWARGS.get(method, {}))


@pytest.mark.parametrize(("source", "method"), list(ALLOWED), ids=lambda v: str(v))
def test_allowed_transition_moves_and_saves(source, method):
    run = run_row(source)
    call(run, method)
    run.save()
    assert Run.objects.get(pk=run.pk).status == ALLOWED[(source, method)]


@pytest.mark.parametrize(("source", "method"), FORBIDDEN, ids=lambda v: str(v))
def test_forbidden_transition_raises(source, method):
    run = run_row(source)
    with pytest.raises(TransitionNotAllowed):
        call(run, method)
    assert run.status == source
    assert Run.objects.get(pk=run.pk).status == source


@pytest.mark.parametrize(("source", "method"), list(ALLOWED_COMPENSATING), ids=lambda v: str(v))
def test_allowed_transition_of_a_compensating_run_moves_and_saves(source, method):
    run = run_row(source, compensating=True)
    call(run, method)
    run.save()
    assert Run.objects.get(pk=run.pk).status == ALLOWED_COMPENSATING[(source, method)]


@pytest.mark.parametrize(("source", "method"), FORBIDDEN_COMPENSATING, ids=lambda v: str(v))
def test_forbidden_transition_of_a_compensating_run_raises(source, method):
    run = run_row(source, compensating=True)
    with pytest.raises(TransitionNotAllowed):
        call(run, method)
    assert run.status == source
    assert Run.objects.get(pk=run.pk).status == source


def test_compensate_marks_the_run_compensating():
    run = run_row(RunStatus.FAILED)
    run.compensate()
    run.save()
    assert Run.objects.get(pk=run.pk).compensating is True


def test_every_status_and_method_is_covered():
    assert len(ALLOWED) + len(FORBIDDEN) == len(RunStatus.values) * len(METHODS)
    declared = {t.name for t in Run._meta.get_field("status").get_all_transitions(Run)}
    assert declared == set(METHODS)


def test_direct_assignment_of_status_is_refused():
    run = run_row(RunStatus.QUEUED)
    with pytest.raises(AttributeError):
        run.status = RunStatus.SUCCEEDED
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED


def test_second_of_two_concurrent_transitions_conflicts():
    run = run_row(RunStatus.RUNNING)
    first, second = Run.objects.get(pk=run.pk), Run.objects.get(pk=run.pk)
    first.succeed()
    first.save()
    second.cancel(error=ERROR)
    # As django-fsm asks, save inside atomic(): the conflict rolls back the second change.
    with pytest.raises(ConcurrentTransition), transaction.atomic():
        second.save()
    assert Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED
