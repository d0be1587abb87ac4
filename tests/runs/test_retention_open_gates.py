"""Retention never touches a run that holds anything open: a run waiting at a gate, a step
that is not finished, a pending approval, whatever its timestamps or the policy's statuses
say. The old finished runs beside them go."""

from datetime import timedelta

import pytest
from django.utils import timezone

from agentops.actors import Actor
from approvals.models import ApprovalRequest, ApprovalStatus
from audit.models import AuditEvent
from audit.selectors import chain_verify
from runs.control.create import run_create
from runs.control.fork import run_fork
from runs.models import Checkpoint, RetentionPolicy, Run, RunStatus, Step, StepStatus
from runs.retention import retention_preview, retention_purge
from testsupport.factories import plan_run, run_awaiting_approval

pytestmark = pytest.mark.django_db

CALCULATE = {"tool": "calculate", "args": {"expression": "1+1"}}
LONG_AGO = timedelta(days=400)


def _age(run: Run, *, finished: bool = True) -> None:
    """Make ``run`` look created (and finished, when ``finished``) 400 days ago."""
    old = timezone.now() - LONG_AGO
    Run.objects.filter(pk=run.pk).update(created_at=old, finished_at=old if finished else None)


def _rows(run: Run) -> dict[str, object]:
    """What the run holds, to compare before and after a purge."""
    return {
        "run": Run.objects.filter(pk=run.pk).values("status", "state", "metadata").first(),
        "steps": list(Step.objects.filter(run=run).order_by("index").values("status", "args")),
        "checkpoints": Checkpoint.objects.filter(run=run).count(),
        "approvals": list(ApprovalRequest.objects.filter(run=run).values("status")),
        "events": AuditEvent.objects.filter(run_id=run.pk).count(),
    }


@pytest.fixture
def old_finished(operator, django_capture_on_commit_callbacks):
    run = plan_run(operator, [CALCULATE, CALCULATE], capture=django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED
    _age(run)
    return run


@pytest.fixture
def old_pending(operator, django_capture_on_commit_callbacks):
    """A run waiting for an approval, created and 'finished' 400 days ago."""
    run = run_awaiting_approval(operator, capture=django_capture_on_commit_callbacks)
    _age(run)
    return run


@pytest.mark.parametrize("action", ["delete", "redact"])
def test_a_run_waiting_for_approval_is_kept_however_old(
    action, old_finished, old_pending, django_capture_on_commit_callbacks
):
    # Saved without clean(), as a careless script would: a non-terminal status in the list.
    RetentionPolicy.objects.create(
        name="everything", ttl_days=1, action=action, statuses=["succeeded", "waiting"]
    )
    before = _rows(old_pending)
    assert before["approvals"] == [{"status": ApprovalStatus.PENDING}]

    assert retention_preview(policy=RetentionPolicy.objects.get()).runs == 1
    report = retention_purge(actor=Actor.system("retention"))

    assert report["runs" if action == "delete" else "redacted_runs"] == 1
    assert _rows(old_pending) == before
    assert chain_verify(f"run:{old_pending.pk}").ok
    if action == "delete":
        assert not Run.objects.filter(pk=old_finished.pk).exists()
    else:
        assert Run.objects.get(pk=old_finished.pk).metadata["redacted_at"]


def test_a_finished_run_still_holding_a_pending_approval_is_kept(old_finished, old_pending):
    """Rows out of step with each other (a run marked failed while its approval still
    waits) are not retention's to settle: the run stays."""
    Run.objects.filter(pk=old_pending.pk).update(status=RunStatus.FAILED)
    Step.objects.filter(run=old_pending, status=StepStatus.WAITING).update(
        status=StepStatus.CANCELLED
    )
    RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    before = _rows(old_pending)

    assert retention_purge(actor=Actor.system("retention"))["runs"] == 1

    assert _rows(old_pending) == before
    assert not Run.objects.filter(pk=old_finished.pk).exists()


def test_a_finished_run_with_a_step_not_finished_is_kept(old_finished, operator):
    Step.objects.filter(run=old_finished, index=1).update(status=StepStatus.WAITING_RETRY)
    RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    assert retention_preview(policy=RetentionPolicy.objects.get()).runs == 0
    assert retention_purge(actor=Actor.system("retention"))["runs"] == 0
    assert Step.objects.filter(run=old_finished).count() == 2


def test_an_old_parent_goes_and_its_waiting_fork_stays_intact(
    operator, old_pending, django_capture_on_commit_callbacks
):
    parent = plan_run(
        operator,
        [CALCULATE, {"tool": "send_email", "args": {"to": ["a@b.co"], "subject": "s", "body": ""}}],
        capture=django_capture_on_commit_callbacks,
    )
    Run.objects.filter(pk=parent.pk).update(status=RunStatus.CANCELLED)
    Step.objects.filter(run=parent, status=StepStatus.WAITING).update(status=StepStatus.CANCELLED)
    ApprovalRequest.objects.filter(run=parent).update(status=ApprovalStatus.CANCELLED)
    with django_capture_on_commit_callbacks(execute=True):
        child = run_fork(run_id=parent.pk, actor=Actor.for_user(operator), from_index=1)
    child.refresh_from_db()
    assert child.forked_from_id == parent.pk
    assert child.status_info.value == "awaiting_approval"
    _age(parent)
    _age(child)
    RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    before = {run.pk: _rows(run) for run in (child, old_pending)}

    assert retention_purge(actor=Actor.system("retention"))["runs"] == 1

    assert not Run.objects.filter(pk=parent.pk).exists()
    child.refresh_from_db()
    assert child.forked_from_id is None
    assert child.metadata["forked_from"]["run"] == str(parent.pk)
    for run in (child, old_pending):
        assert _rows(run) == before[run.pk]
        assert chain_verify(f"run:{run.pk}").ok


def test_a_run_not_finished_is_kept_even_when_a_policy_names_its_status(
    operator, old_finished, django_capture_on_commit_callbacks
):
    """A client run with no step yet holds no gate: only its status says it is live."""
    with django_capture_on_commit_callbacks(execute=True):
        idle = run_create(actor=Actor.for_user(operator), agent="client", goal="idle")
    idle.refresh_from_db()
    assert not idle.is_terminal
    _age(idle)
    RetentionPolicy.objects.create(
        name="careless", ttl_days=1, statuses=["queued", "running", "succeeded"]
    )
    assert retention_purge(actor=Actor.system("retention"))["runs"] == 1
    assert Run.objects.get(pk=idle.pk).status == idle.status
