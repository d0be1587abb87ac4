"""Artifacts in an S3-compatible service, through django-storages' S3 backend: moto's server
mode, started by the test on 127.0.0.1, stands in for the service. Uploads stream to the
bucket, downloads (whole and by range) stream from it through agentops, deletion removes the
object after the commit, and ``verify_artifacts`` reads the bucket back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from django.core.management import CommandError, call_command
from moto.server import ThreadedMotoServer

from tests.api.conftest import token_client
from tests.artifacts.conftest import body_of, content_url, upload
from testsupport.processes import free_port

pytestmark = pytest.mark.django_db

BUCKET = "agentops-artifacts"
CREDENTIALS = {"aws_access_key_id": "test-key", "aws_secret_access_key": "test-secret"}


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """An S3-compatible server (moto) on a free port of 127.0.0.1."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def bucket(s3_endpoint: str, settings) -> Any:
    """An empty private bucket, and the artifacts storage set to it as the README says."""
    s3 = boto3.resource("s3", endpoint_url=s3_endpoint, region_name="us-east-1", **CREDENTIALS)
    created = s3.Bucket(BUCKET)
    if created.creation_date is None:
        created.create()
    created.objects.all().delete()
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": BUCKET,
                "endpoint_url": s3_endpoint,
                "region_name": "us-east-1",
                "access_key": CREDENTIALS["aws_access_key_id"],
                "secret_key": CREDENTIALS["aws_secret_access_key"],
                "addressing_style": "path",
                "default_acl": None,
                "file_overwrite": False,
                "max_memory_size": 8 * 1024 * 1024,
            },
        },
    }
    return created


def _keys(bucket: Any) -> list[str]:
    return sorted(item.key for item in bucket.objects.all())


def test_an_artifact_round_trips_through_the_bucket(
    bucket, run, operator, django_capture_on_commit_callbacks
):
    api = token_client(operator)
    content = bytes(range(256)) * 4096  # 1 MiB of every byte value
    response = upload(api, run.pk, content, "application/octet-stream", name="blob.bin")
    assert response.status_code == 201, response.json()
    artifact = response.json()
    assert _keys(bucket) == [f"{run.project_id}/{run.pk}/{artifact['id']}"]
    assert bucket.Object(_keys(bucket)[0]).get()["Body"].read() == content

    whole = api.get(content_url(artifact["id"]))
    assert (whole.status_code, body_of(whole)) == (200, content)
    ranged = api.get(content_url(artifact["id"]), HTTP_RANGE="bytes=1000-1999")
    assert (ranged.status_code, body_of(ranged)) == (206, content[1000:2000])
    tail = api.get(content_url(artifact["id"]), HTTP_RANGE="bytes=-10")
    assert body_of(tail) == content[-10:]

    with django_capture_on_commit_callbacks(execute=True):
        assert api.delete(f"/api/v1/artifacts/{artifact['id']}/").status_code == 204
    assert _keys(bucket) == []


def test_verify_reads_the_bucket_back(bucket, run, operator):
    api = token_client(operator)
    artifact = upload(api, run.pk, b"kept as uploaded\n").json()
    call_command("verify_artifacts")
    key = _keys(bucket)[0]
    bucket.put_object(Key=key, Body=b"rewritten in the bucket\n")
    with pytest.raises(CommandError, match="1 of 1"):
        call_command("verify_artifacts")
    bucket.Object(key).delete()
    with pytest.raises(CommandError, match="1 of 1"):
        call_command("verify_artifacts", run=artifact["run"])


def test_a_refused_upload_leaves_no_object(bucket, run, operator, settings):
    api = token_client(operator)
    assert upload(api, run.pk, b"<html></html>", "image/png").status_code == 400
    settings.AGENTOPS_ARTIFACT_MAX_BYTES = 10
    assert upload(api, run.pk, b"x" * 11).status_code == 413
    assert _keys(bucket) == []
