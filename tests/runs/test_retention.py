"""Retention: finished runs past their policy's TTL are deleted or redacted in small batches;
audit chains outlive their runs by their own TTL and are removed whole."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from agentops.actors import Actor
from approvals.models import ApprovalDecision, ApprovalRequest
from approvals.services import approval_decide
from audit.models import AuditChainHead, AuditEvent
from audit.selectors import audit_verify, chain_verify
from runs.control.create import run_create
from runs.control.lifecycle import run_cancel
from runs.models import Checkpoint, RetentionPolicy, Run, Step, StepAttempt, ToolCall
from runs.retention import retention_purge
from testsupport.factories import make_run, run_awaiting_approval

pytestmark = pytest.mark.django_db

STEPS = [{"tool": "echo", "args": {"value": i}} for i in range(5)]


def finished_run(operator, capture, *, days_ago: int, steps=STEPS) -> Run:
    run = make_run(operator, goal="old", steps=steps, capture=capture)
    Run.objects.filter(pk=run.pk).update(finished_at=timezone.now() - timedelta(days=days_ago))
    return run


def test_expired_runs_are_deleted_with_everything_they_hold(
    operator, reviewer, django_capture_on_commit_callbacks, settings
):
    RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    old = finished_run(operator, django_capture_on_commit_callbacks, days_ago=40)
    mailed = run_awaiting_approval(operator, capture=django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(
            approval_id=ApprovalRequest.objects.get(run=mailed).pk,
            actor=Actor.for_user(reviewer),
            decision="reject",
            comment="no",
        )
    Run.objects.filter(pk=mailed.pk).update(finished_at=timezone.now() - timedelta(days=31))
    recent = finished_run(operator, django_capture_on_commit_callbacks, days_ago=1)

    report = retention_purge(actor=Actor.system("retention"), batch_size=2)

    assert (report["runs"], report["steps"]) == (2, 6)
    assert report["batches"] >= 3  # 5 steps at 2 a batch, then the runs
    assert list(Run.objects.values_list("pk", flat=True)) == [recent.pk]
    for model in (Step, StepAttempt, Checkpoint, ToolCall):
        assert not model.objects.exclude(
            **{"run" if model is not StepAttempt else "step__run": recent}
        ).exists()
    assert not ApprovalRequest.objects.exists()
    assert not ApprovalDecision.objects.exists()
    # Audit events outlive their runs, and the purge itself is on record.
    assert chain_verify(f"run:{old.pk}").ok
    purged = AuditEvent.objects.get(verb="retention.purged")
    assert purged.payload["runs"] == 2


def test_a_dry_run_counts_and_changes_nothing(operator, django_capture_on_commit_callbacks):
    RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    finished_run(operator, django_capture_on_commit_callbacks, days_ago=40)
    report = retention_purge(actor=Actor.system("retention"), dry_run=True)
    assert (report["runs"], report["steps"]) == (1, 5)
    assert Run.objects.count() == 1
    assert not AuditEvent.objects.filter(verb="retention.purged").exists()


def test_unfinished_and_other_agent_runs_are_kept(operator, django_capture_on_commit_callbacks):
    RetentionPolicy.objects.create(name="client runs", ttl_days=1, agent="client")
    finished_run(operator, django_capture_on_commit_callbacks, days_ago=40)  # a plan run
    with django_capture_on_commit_callbacks(execute=True):
        idle = run_create(actor=Actor.for_user(operator), agent="client", goal="idle")
    Run.objects.filter(pk=idle.pk).update(created_at=timezone.now() - timedelta(days=9))
    assert retention_purge(actor=Actor.system("retention"))["runs"] == 0
    assert Run.objects.count() == 2


def test_redaction_keeps_the_rows_and_blanks_their_data(
    operator, django_capture_on_commit_callbacks
):
    RetentionPolicy.objects.create(name="redact", ttl_days=7, action="redact")
    run = finished_run(operator, django_capture_on_commit_callbacks, days_ago=8)
    report = retention_purge(actor=Actor.system("retention"))
    assert report["redacted_runs"] == 1
    run.refresh_from_db()
    assert run.metadata["redacted_at"]
    assert run.state == {}
    assert set(run.steps.values_list("result", flat=True)) == {None}
    assert not run.checkpoints.exists()
    # Already redacted runs are not counted again.
    assert retention_purge(actor=Actor.system("retention"))["redacted_runs"] == 0


def test_audit_chains_of_deleted_runs_expire_whole(
    operator, django_capture_on_commit_callbacks, settings
):
    settings.AGENTOPS_AUDIT_RETENTION_DAYS = 90
    RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    run = finished_run(operator, django_capture_on_commit_callbacks, days_ago=40)
    retention_purge(actor=Actor.system("retention"))
    chain = f"run:{run.pk}"
    assert AuditEvent.objects.filter(chain=chain).exists()
    later = timezone.now() + timedelta(days=91)
    report = retention_purge(actor=Actor.system("retention"), now=later, batch_size=3)
    assert report["audit_events"] > 3
    assert not AuditEvent.objects.filter(chain=chain).exists()
    assert not AuditChainHead.objects.filter(chain=chain).exists()
    purge = AuditEvent.objects.get(verb="audit.chains_purged")
    assert list(purge.payload["chains"]) == [chain]
    assert all(report.ok for report in audit_verify())


def test_the_command_reports_what_it_would_do(operator, django_capture_on_commit_callbacks, capsys):
    RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    finished_run(operator, django_capture_on_commit_callbacks, days_ago=40)
    call_command("purge_retention", "--dry-run")
    assert "would delete 1 runs with 5 steps" in capsys.readouterr().out
    call_command("purge_retention", "--batch-size", "2")
    assert "deleted 1 runs with 5 steps" in capsys.readouterr().out
    assert not Run.objects.exists()


def test_cancelled_runs_count_as_finished(operator, django_capture_on_commit_callbacks):
    RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(actor=Actor.for_user(operator), agent="client", goal="c")
    with django_capture_on_commit_callbacks(execute=True):
        run_cancel(run_id=run.pk, actor=Actor.for_user(operator))
    Run.objects.filter(pk=run.pk).update(finished_at=timezone.now() - timedelta(days=31))
    assert retention_purge(actor=Actor.system("retention"))["runs"] == 1
