"""A subject's erasure deletes the artifacts of their runs and sessions, and their files once
the deletion commits; another subject's stay."""

from __future__ import annotations

from typing import Any

import pytest

from artifacts.models import Artifact
from projects.roles import Role
from tests.api.conftest import RUNS_URL, token_client
from tests.artifacts.conftest import stored_files, upload
from testsupport.factories import make_user

pytestmark = pytest.mark.django_db


def subjects_run(api: Any, subject: str) -> str:
    """A client run in a new session of ``subject``; its id."""
    session = api.post(
        "/api/v1/sessions/", {"external_id": subject, "subject": subject}, format="json"
    ).json()["id"]
    return api.post(
        RUNS_URL, {"agent": "client", "goal": "help", "session": session}, format="json"
    ).json()["id"]


def test_erasure_deletes_the_subjects_artifacts_and_their_files_after_commit(
    seeded, artifact_dir, django_capture_on_commit_callbacks
):
    api = token_client(make_user("ada", Role.OPERATOR, Role.REVIEWER))
    erased_run, kept_run = subjects_run(api, "user-1"), subjects_run(api, "user-2")
    for run in (erased_run, erased_run, kept_run):
        assert upload(api, run, b"about the user\n").status_code == 201
    kept = Artifact.objects.get(run_id=kept_run)
    assert Artifact.objects.filter(run_id=erased_run).exclude(session=None).count() == 2

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api.delete("/api/v1/subjects/user-1/")
    assert response.status_code == 200
    assert response.json()["artifacts"] == 2
    # The rows are gone; the files wait for the commit.
    assert list(Artifact.objects.values_list("pk", flat=True)) == [kept.pk]
    assert len(stored_files(artifact_dir)) == 3
    for callback in callbacks:
        callback()
    assert stored_files(artifact_dir) == [artifact_dir / kept.storage_name]
