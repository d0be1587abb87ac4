"""The step state machine: every allowed move, every forbidden one, protection and races."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from django_fsm import ConcurrentTransition, TransitionNotAllowed

from runs.models import RunStatus, Step, StepStatus
from testsupport.factories import run_row

pytestmark = pytest.mark.django_db

NOW = timezone.now()
ERROR = {"type": "test", "message": "test"}
KWARGS: dict[str, dict[str, Any]] = {
    "claim": {"owner": "host:1", "lease_expires_at": NOW + timedelta(seconds=90), "now": NOW},
    "succeed": {"result": {"ok": True}, "now": NOW},
    "schedule_retry": {"error": ERROR, "next_attempt_at": NOW, "now": NOW},
    "fail": {"error": ERROR, "now": NOW},
    "reject": {"error": ERROR, "now": NOW},
    "refuse": {"now": NOW},
    "cancel": {"now": NOW},
    "hand_over": {"now": NOW},
    "report_start": {"owner": "client:1", "now": NOW},
    "hand_back": {"error": ERROR, "now": NOW},
    "retry_by_client": {"now": NOW},
    "settle_happened": {"result": {"ok": True}, "now": NOW},
    "hold_result": {"result": {"ok": False}, "error": ERROR, "now": NOW},
    "accept_result": {"now": NOW},
}
METHODS = [
    "wait",
    "enqueue",
    "claim",
    "succeed",
    "schedule_retry",
    "fail",
    "retry",
    "reject",
    "refuse",
    "skip",
    "cancel",
    "hand_over",
    "report_start",
    "hand_back",
    "retry_by_client",
    "settle_happened",
    "hold_result",
    "accept_result",
]
S = StepStatus
# (source, method) → target, as ARCHITECTURE.md's step state model says.
ALLOWED = {
    (S.PENDING, "wait"): S.WAITING,
    (S.PENDING, "enqueue"): S.QUEUED,
    (S.WAITING, "enqueue"): S.QUEUED,
    (S.WAITING_RETRY, "enqueue"): S.QUEUED,
    (S.QUEUED, "claim"): S.RUNNING,
    (S.RUNNING, "succeed"): S.SUCCEEDED,
    (S.RUNNING, "hold_result"): S.WAITING,
    (S.WAITING, "accept_result"): S.SUCCEEDED,
    (S.RUNNING, "schedule_retry"): S.WAITING_RETRY,
    (S.RUNNING, "fail"): S.FAILED,
    (S.FAILED, "retry"): S.QUEUED,
    (S.WAITING, "reject"): S.REJECTED,
    (S.PENDING, "skip"): S.SKIPPED,
    # Outside the run's grants, or denied by a rule: refused before any gate.
    (S.PENDING, "refuse"): S.REFUSED,
    # Client steps: handed to the client app, which reports their outcome.
    (S.PENDING, "hand_over"): S.READY,
    (S.WAITING, "hand_over"): S.READY,
    (S.READY, "report_start"): S.RUNNING,
    (S.RUNNING, "hand_back"): S.READY,
    (S.FAILED, "retry_by_client"): S.READY,
    # An operator settles an unknown outcome: the call happened.
    (S.FAILED, "settle_happened"): S.SUCCEEDED,
    **{
        (source, "cancel"): S.CANCELLED
        for source in [S.PENDING, S.WAITING, S.READY, S.QUEUED, S.RUNNING, S.WAITING_RETRY]
    },
}
FORBIDDEN = [
    (status, method)
    for status in StepStatus.values
    for method in METHODS
    if (status, method) not in ALLOWED
]


def make_step(status: str) -> Step:
    # Direct assignment of the protected status is forbidden: the row is created in it.
    step = {"args": {"value": 1}, "args_hash": "0" * 64, "risk": "low", "status": status}
    return run_row(RunStatus.RUNNING, steps=[step]).steps.get()


def call(step: Step, method: str) -> None:
    getattr(step, method)(**KWARGS.get(method, {}))


@pytest.mark.parametrize(("source", "method"), list(ALLOWED), ids=lambda v: str(v))
def test_allowed_transition_moves_and_saves(source, method):
    step = make_step(source)
    call(step, method)
    step.save()
    assert Step.objects.get(pk=step.pk).status == ALLOWED[(source, method)]


@pytest.mark.parametrize(("source", "method"), FORBIDDEN, ids=lambda v: str(v))
def test_forbidden_transition_raises(source, method):
    step = make_step(source)
    with pytest.raises(TransitionNotAllowed):
        call(step, method)
    assert step.status == source
    assert Step.objects.get(pk=step.pk).status == source


def test_every_status_and_method_is_covered():
    assert len(ALLOWED) + len(FORBIDDEN) == len(StepStatus.values) * len(METHODS)
    declared = {t.name for t in Step._meta.get_field("status").get_all_transitions(Step)}
    assert declared == set(METHODS)


def test_claim_counts_an_attempt_and_takes_the_lease():
    step = make_step(S.QUEUED)
    call(step, "claim")
    assert (step.attempts, step.lease_owner) == (1, "host:1")


def test_retry_after_failure_grants_fresh_attempts():
    step = make_step(S.RUNNING)
    step.attempts = step.max_attempts = 3
    call(step, "fail")
    step.retry()
    assert step.max_attempts == 6


def test_direct_assignment_of_status_is_refused():
    step = make_step(S.PENDING)
    with pytest.raises(AttributeError):
        step.status = S.SUCCEEDED
    assert Step.objects.get(pk=step.pk).status == S.PENDING


def test_second_of_two_concurrent_transitions_conflicts():
    step = make_step(S.QUEUED)
    first, second = Step.objects.get(pk=step.pk), Step.objects.get(pk=step.pk)
    call(first, "claim")
    first.save()
    call(second, "claim")
    # As django-fsm asks, save inside atomic(): the conflict rolls back the second change.
    with pytest.raises(ConcurrentTransition), transaction.atomic():
        second.save()
    assert Step.objects.get(pk=step.pk).attempts == 1
