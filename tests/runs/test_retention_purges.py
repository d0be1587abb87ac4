"""Retention purges as records: started, executed once, counted, audited, one at a time."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from audit.models import AuditEvent
from runs import purges, tasks
from runs.models import PurgeStatus, RetentionPolicy, RetentionPurge, Run
from testsupport.concurrency import run_together
from testsupport.factories import plan_run

CALCULATE = {"tool": "calculate", "args": {"expression": "1+1"}}


def _old_run(operator, capture, steps: int = 3, days: int = 40) -> Run:
    run = plan_run(operator, [CALCULATE] * steps, capture=capture)
    Run.objects.filter(pk=run.pk).update(finished_at=timezone.now() - timedelta(days=days))
    return run


@pytest.mark.django_db
def test_a_purge_of_one_policy_is_recorded_counted_and_audited(
    operator, django_capture_on_commit_callbacks
):
    policy = RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    RetentionPolicy.objects.create(name="other", ttl_days=30, agent="client")
    _old_run(operator, django_capture_on_commit_callbacks, steps=3)
    _old_run(operator, django_capture_on_commit_callbacks, steps=2)
    kept = _old_run(operator, django_capture_on_commit_callbacks, days=5)
    actor = Actor.for_user(operator)

    purge = purges.purge_start(actor=actor, policy_id=policy.pk)
    assert (purge.status, purge.started_by, purge.policy_name) == ("queued", operator, "30 days")
    done = purges.purge_execute(purge_id=purge.pk, actor=Actor.system("retention"))

    assert done is not None
    assert (done.status, done.runs, done.steps, done.redacted_runs) == ("succeeded", 2, 5, 0)
    assert done.started_at <= done.finished_at
    assert done.duration_ms is not None
    assert list(Run.objects.values_list("pk", flat=True)) == [kept.pk]
    started = AuditEvent.objects.get(verb="retention.purge_started")
    assert (started.chain, started.actor_name, started.object_id) == (
        "system",
        "olivia",
        str(purge.pk),
    )
    assert started.payload == {"policy": policy.pk, "policy_name": "30 days"}
    purged = AuditEvent.objects.get(verb="retention.purged")
    assert (purged.object_id, purged.payload["runs"], purged.payload["policy"]) == (
        str(purge.pk),
        2,
        policy.pk,
    )
    # A purge of one policy leaves the audit chains to the full purge.
    assert not AuditEvent.objects.filter(verb="audit.chains_purged").exists()


@pytest.mark.django_db
def test_a_twin_delivery_runs_the_purge_once(operator, django_capture_on_commit_callbacks):
    policy = RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    _old_run(operator, django_capture_on_commit_callbacks)
    purge = purges.purge_start(actor=Actor.for_user(operator), policy_id=policy.pk)
    tasks.retention_purge_execute(purge.pk)
    assert purges.purge_execute(purge_id=purge.pk, actor=Actor.system("retention")) is None
    purge.refresh_from_db()
    assert (purge.status, purge.runs, purge.steps) == ("succeeded", 1, 3)
    assert AuditEvent.objects.filter(verb="retention.purged").count() == 1


@pytest.mark.django_db
def test_a_second_purge_is_refused_while_one_is_open(operator):
    policy = RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    first = purges.purge_start(actor=Actor.for_user(operator), policy_id=policy.pk)
    with pytest.raises(Conflict):
        purges.purge_start(actor=Actor.for_user(operator), policy_id=policy.pk)
    # Beat's purge skips, and the command says why.
    assert tasks.retention_purge() is None
    with pytest.raises(CommandError, match="another retention purge"):
        call_command("purge_retention")
    assert list(RetentionPurge.objects.values_list("pk", flat=True)) == [first.pk]
    assert AuditEvent.objects.filter(verb="retention.purge_started").count() == 1


@pytest.mark.django_db(transaction=True)
def test_purges_started_at_the_same_moment_run_one(operator):
    policy = RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    actor = Actor.for_user(operator)
    results = run_together(
        [lambda: purges.purge_start(actor=actor, policy_id=policy.pk)] * 4, expected=(Conflict,)
    )
    started = [r for r in results if isinstance(r, RetentionPurge)]
    assert len(started) == 1
    assert sum(isinstance(r, Conflict) for r in results) == 3
    assert RetentionPurge.objects.count() == 1
    assert AuditEvent.objects.filter(verb="retention.purge_started").count() == 1


@pytest.mark.django_db
def test_a_purge_whose_worker_died_no_longer_blocks(operator):
    policy = RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    dead = purges.purge_start(actor=Actor.for_user(operator), policy_id=policy.pk)
    # Claimed by a worker that died: the record says running, nobody holds the lock.
    RetentionPurge.objects.filter(pk=dead.pk).update(status=PurgeStatus.RUNNING)
    fresh = purges.purge_start(actor=Actor.for_user(operator), policy_id=policy.pk)
    dead.refresh_from_db()
    assert (dead.status, dead.error) == ("failed", "interrupted: its worker stopped")
    assert fresh.status == "queued"
    assert AuditEvent.objects.filter(verb="retention.purge_failed").count() == 1


@pytest.mark.django_db
def test_a_running_purge_that_holds_the_lock_still_blocks(operator):
    from django.db import connections

    policy = RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    running = purges.purge_start(actor=Actor.for_user(operator), policy_id=policy.pk)
    RetentionPurge.objects.filter(pk=running.pk).update(status=PurgeStatus.RUNNING)
    # Another session holds the lock, as the executing worker does.
    other = connections.create_connection("default")
    with other.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [purges.PURGE_LOCK_KEY])
    try:
        with pytest.raises(Conflict):
            purges.purge_start(actor=Actor.for_user(operator), policy_id=policy.pk)
        assert purges.purge_execute(purge_id=running.pk, actor=Actor.system()) is None
    finally:
        other.close()
    running.refresh_from_db()
    assert running.status == "running"


@pytest.mark.django_db
def test_a_disabled_or_unknown_policy_is_not_started(operator):
    disabled = RetentionPolicy.objects.create(name="off", ttl_days=30, enabled=False)
    with pytest.raises(InvalidInput, match="disabled"):
        purges.purge_start(actor=Actor.for_user(operator), policy_id=disabled.pk)
    with pytest.raises(RetentionPolicy.DoesNotExist):
        purges.purge_start(actor=Actor.for_user(operator), policy_id=disabled.pk + 1)
    assert not RetentionPurge.objects.exists()
    assert not AuditEvent.objects.filter(verb__startswith="retention.").exists()


@pytest.mark.django_db
def test_a_purge_whose_policy_was_deleted_fails_instead_of_purging_everything(
    operator, django_capture_on_commit_callbacks
):
    policy = RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    RetentionPolicy.objects.create(name="all", ttl_days=1)
    run = _old_run(operator, django_capture_on_commit_callbacks)
    purge = purges.purge_start(actor=Actor.for_user(operator), policy_id=policy.pk)
    policy.delete()
    done = purges.purge_execute(purge_id=purge.pk, actor=Actor.system("retention"))
    assert done is not None
    assert done.status == "failed"
    assert "was deleted" in done.error
    assert Run.objects.filter(pk=run.pk).exists()
    assert AuditEvent.objects.get(verb="retention.purge_failed").payload["error"] == done.error


@pytest.mark.django_db
def test_beats_purge_is_recorded_as_the_systems(operator, django_capture_on_commit_callbacks):
    RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    _old_run(operator, django_capture_on_commit_callbacks)
    purge_id = tasks.retention_purge()
    purge = RetentionPurge.objects.get(pk=purge_id)
    assert (purge.status, purge.policy, purge.started_by, purge.started_by_name) == (
        "succeeded",
        None,
        None,
        "retention",
    )
    assert purge.runs == 1
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_the_record_shows_the_counts_after_each_transaction(
    operator, django_capture_on_commit_callbacks, monkeypatch
):
    policy = RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    _old_run(operator, django_capture_on_commit_callbacks, steps=5)
    purge = purges.purge_start(actor=Actor.for_user(operator), policy_id=policy.pk)
    seen = []
    original = purges.retention_purge

    def observed(**kwargs):
        update = kwargs["on_progress"]

        def observe(report):
            update(report)
            row = RetentionPurge.objects.values_list("status", "steps", "runs").get(pk=purge.pk)
            seen.append(row)

        return original(**{**kwargs, "on_progress": observe})

    monkeypatch.setattr(purges, "retention_purge", observed)
    purges.purge_execute(purge_id=purge.pk, actor=Actor.system("retention"), batch_size=2)
    assert seen == [("running", 2, 0), ("running", 4, 0), ("running", 5, 0), ("running", 5, 1)]
    purge.refresh_from_db()
    assert (purge.status, purge.steps, purge.runs, purge.batches) == ("succeeded", 5, 1, 4)


@pytest.mark.django_db
def test_a_purge_whose_task_was_lost_no_longer_blocks(operator):
    policy = RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    lost = purges.purge_start(actor=Actor.for_user(operator), policy_id=policy.pk)
    RetentionPurge.objects.filter(pk=lost.pk).update(
        created_at=timezone.now() - purges.LOST_AFTER - timedelta(seconds=1)
    )
    fresh = purges.purge_start(actor=Actor.for_user(operator), policy_id=policy.pk)
    lost.refresh_from_db()
    assert (lost.status, lost.error) == ("failed", "never started: its task was lost")
    assert fresh.status == "queued"
    # Its message arriving late finds nothing to do.
    assert purges.purge_execute(purge_id=lost.pk, actor=Actor.system()) is None
