"""An upload's ``Idempotency-Key``: the same key and body answer the first upload's artifact
again and store no second file; the same key with another body, name or run is a 422; keys
belong to their uploader; a malformed key is a 400. As the API's other create endpoints."""

from __future__ import annotations

from typing import Any

import pytest

from agentops.actors import Actor
from artifacts.models import Artifact
from audit.models import AuditEvent
from projects.roles import Role
from runs.control.create import run_create
from tests.api.conftest import token_client
from tests.artifacts.conftest import ARTIFACTS_URL, stored_files
from testsupport.factories import make_user
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

TEXT = b"the report\n" * 1000


@pytest.fixture
def api(operator):
    return token_client(operator)


def upload(api: Any, run_id: Any, content: bytes, key: str, name: str = "report.txt") -> Any:
    return api.post(
        f"{ARTIFACTS_URL}?run={run_id}&name={name}",
        data=content,
        content_type="text/plain",
        HTTP_IDEMPOTENCY_KEY=key,
    )


def test_the_same_key_and_body_answer_the_first_artifact_and_store_nothing_more(
    api, run, artifact_dir
):
    first = upload(api, run.pk, TEXT, "upload-1")
    assert first.status_code == 201, first.json()
    assert "Idempotent-Replayed" not in first.headers
    files = stored_files(artifact_dir)
    with assert_unchanged():
        again = upload(api, run.pk, TEXT, "upload-1")
    assert again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert stored_files(artifact_dir) == files
    assert Artifact.objects.count() == 1
    assert AuditEvent.objects.filter(verb="artifact.uploaded").count() == 1
    # Another key is another upload.
    other = upload(api, run.pk, TEXT, "upload-2")
    assert other.status_code == 201
    assert other.json()["id"] != first.json()["id"]
    assert len(stored_files(artifact_dir)) == 2


@pytest.mark.parametrize(
    "change",
    [
        {"content": TEXT[:-1] + b"!"},  # same size, other bytes
        {"content": TEXT + b"more"},
        {"content": TEXT[:10]},
        {"name": "other.txt"},
        {"run": "other"},
    ],
)
def test_the_same_key_with_another_upload_is_refused(api, run, operator, artifact_dir, change):
    first = upload(api, run.pk, TEXT, "upload-1")
    assert first.status_code == 201
    other_run = run_create(actor=Actor.for_user(operator), agent="client", goal="another")
    run_id = other_run.pk if change.get("run") else run.pk
    content = change.get("content", TEXT)
    with assert_unchanged():
        refused = upload(api, run_id, content, "upload-1", name=change.get("name", "report.txt"))
    assert refused.status_code == 422, refused.json()
    assert "Idempotency-Key" in refused.json()["detail"]
    assert len(stored_files(artifact_dir)) == 1


def test_keys_belong_to_their_uploader(api, run, artifact_dir):
    first = upload(api, run.pk, TEXT, "upload-1")
    colleague = token_client(make_user("oscar", Role.OPERATOR))
    theirs = upload(colleague, run.pk, TEXT, "upload-1")
    assert theirs.status_code == 201
    assert theirs.json()["id"] != first.json()["id"]
    assert "Idempotent-Replayed" not in theirs.headers


def test_a_malformed_key_is_refused_before_anything_is_stored(api, run, artifact_dir):
    with assert_unchanged():
        refused = upload(api, run.pk, TEXT, "x" * 256)
    assert refused.status_code == 400
    assert stored_files(artifact_dir) == []
