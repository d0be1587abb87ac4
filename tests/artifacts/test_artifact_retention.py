"""Retention deletes a run's artifacts with the run (those of its steps with the steps), and
redaction with the run's data; their files go once the deleting transaction commits."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.utils import timezone

from agentops.actors import Actor
from artifacts.models import Artifact
from artifacts.services import artifact_upload
from runs.models import RetentionAction, RetentionPolicy, Run, Step
from runs.retention import retention_purge
from tests.artifacts.conftest import stored_files
from testsupport.factories import make_run

pytestmark = pytest.mark.django_db


def finished_run_with_artifacts(operator, capture, *, days_ago: int) -> Run:
    """A finished plan run of three steps with an artifact of the run and one of each step."""
    steps = [{"tool": "echo", "args": {"value": i}} for i in range(3)]
    run = make_run(operator, goal="old", steps=steps, capture=capture)
    Run.objects.filter(pk=run.pk).update(finished_at=timezone.now() - timedelta(days=days_ago))
    for step_id in [None, *Step.objects.filter(run=run).values_list("pk", flat=True)]:
        artifact_upload(
            run_id=run.pk,
            step_id=step_id,
            name="out.txt",
            declared_type="text/plain",
            stream=io.BytesIO(f"{run.pk} {step_id}\n".encode()),
            actor=Actor.for_user(operator),
        )
    return run


def test_deleted_runs_take_their_artifacts_and_then_their_files(
    operator, artifact_dir, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    old = finished_run_with_artifacts(operator, capture, days_ago=40)
    recent = finished_run_with_artifacts(operator, capture, days_ago=1)
    kept = sorted(
        artifact_dir / name
        for name in Artifact.objects.filter(run=recent).values_list("storage_name", flat=True)
    )
    assert len(stored_files(artifact_dir)) == 8

    with capture(execute=False) as callbacks:
        report = retention_purge(actor=Actor.system("retention"), batch_size=2)
    assert report["runs"] == 1
    assert not Artifact.objects.filter(run_id=old.pk).exists()
    assert Artifact.objects.filter(run=recent).count() == 4
    # The rows are gone; the files wait for the commit.
    assert len(stored_files(artifact_dir)) == 8
    for callback in callbacks:
        callback()
    assert stored_files(artifact_dir) == kept


def test_redacted_runs_keep_no_artifact(operator, artifact_dir, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    RetentionPolicy.objects.create(name="redact", ttl_days=30, action=RetentionAction.REDACT)
    old = finished_run_with_artifacts(operator, capture, days_ago=40)
    with capture(execute=True):
        report = retention_purge(actor=Actor.system("retention"))
    assert report["redacted_runs"] == 1
    assert Run.objects.filter(pk=old.pk).exists()
    assert not Artifact.objects.exists()
    assert stored_files(artifact_dir) == []
