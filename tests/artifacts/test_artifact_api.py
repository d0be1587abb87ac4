"""The artifacts API: an upload is stored with its SHA-256, sniffed type and links; listed,
read, downloaded whole or by byte range, and deleted (its file after the commit); every
refusal changes nothing."""

from __future__ import annotations

import hashlib
import io

import pytest

from agentops.actors import Actor
from agentops.errors import InvalidInput
from artifacts.models import Artifact, ArtifactLimit
from artifacts.services import artifact_upload
from audit.models import AuditEvent
from projects.models import Project
from projects.roles import Role
from projects.services import membership_set
from runs.models import Run
from tests.api.conftest import token_client
from tests.artifacts.conftest import (
    ARTIFACTS_URL,
    PNG,
    body_of,
    content_url,
    stored_files,
    upload,
)
from testsupport.factories import make_user
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

TEXT = b"line one\nline two\n" * 100


@pytest.fixture
def api(operator):
    return token_client(operator)


def test_an_upload_keeps_the_bytes_their_sha256_and_who_sent_them(api, run, operator, artifact_dir):
    response = upload(api, run.pk, TEXT, "text/plain; charset=utf-8", name="../../etc/notes.txt")
    assert response.status_code == 201, response.json()
    body = response.json()
    artifact = Artifact.objects.get(pk=body["id"])
    assert body["sha256"] == hashlib.sha256(TEXT).hexdigest() == artifact.sha256
    assert (body["size"], body["name"], body["content_type"]) == (
        len(TEXT),
        "notes.txt",
        "text/plain",
    )
    assert body["declared_type"] == "text/plain"
    assert body["run"] == str(run.pk)
    assert body["step"] is None
    assert body["actor"] == {
        "kind": "api_client",
        "id": str(operator.pk),
        "name": operator.username,
    }
    assert body["href"] == content_url(artifact.pk)
    # The client's name is shown, never a path: the file lies under project/run/artifact id.
    (path,) = stored_files(artifact_dir)
    assert path.relative_to(artifact_dir).as_posix() == f"{run.project_id}/{run.pk}/{artifact.pk}"
    assert path.read_bytes() == TEXT
    event = AuditEvent.objects.get(verb="artifact.uploaded")
    assert (event.object_id, event.run_id, event.actor_name) == (str(artifact.pk), run.pk, "olivia")
    assert event.payload["sha256"] == artifact.sha256


def test_an_upload_names_a_step_of_its_run(api, run, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        step = api.post(
            f"/api/v1/runs/{run.pk}/steps/",
            {
                "tool": "get_reservation_details",
                "args": {"reservation_id": "ABC123"},
                "executor": "client",
            },
            format="json",
        ).json()
    response = upload(api, run.pk, TEXT, step=step["id"])
    assert response.status_code == 201, response.json()
    assert response.json()["step"] == step["id"]
    with assert_unchanged():
        missing = upload(api, run.pk, TEXT, step=step["id"] + 1000)
    assert missing.status_code == 404


def test_list_and_read_are_scoped_to_the_run(
    api, run, operator, django_capture_on_commit_callbacks
):
    first = upload(api, run.pk, b"first\n").json()
    with django_capture_on_commit_callbacks(execute=True):
        other = api.post(
            "/api/v1/runs/", {"agent": "client", "goal": "other"}, format="json"
        ).json()
    second = upload(api, other["id"], b"second\n").json()
    listed = api.get(f"{ARTIFACTS_URL}?run={run.pk}").json()["results"]
    assert [item["id"] for item in listed] == [first["id"]]
    assert {item["id"] for item in api.get(ARTIFACTS_URL).json()["results"]} == {
        first["id"],
        second["id"],
    }
    assert api.get(f"{ARTIFACTS_URL}{first['id']}/").json() == first
    assert api.get(f"{ARTIFACTS_URL}?run=nope").status_code == 400


def test_content_is_streamed_whole_with_safe_headers(api, run):
    artifact = upload(api, run.pk, TEXT).json()
    response = api.get(content_url(artifact["id"]))
    assert response.status_code == 200
    assert response.streaming
    assert body_of(response) == TEXT
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Length"] == str(len(TEXT))
    assert response["Content-Disposition"] == 'inline; filename="notes.txt"'
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in response["Content-Security-Policy"]
    assert response["ETag"] == f'"{artifact["sha256"]}"'
    assert response["Accept-Ranges"] == "bytes"
    download = api.get(content_url(artifact["id"], "?download=1"))
    assert download["Content-Disposition"] == 'attachment; filename="notes.txt"'
    head = api.head(content_url(artifact["id"]))
    assert (head.status_code, head["Content-Length"], head.content) == (200, str(len(TEXT)), b"")


@pytest.mark.parametrize(
    ("header", "status", "content_range", "expected"),
    [
        ("bytes=0-9", 206, f"bytes 0-9/{len(TEXT)}", TEXT[:10]),
        ("bytes=10-", 206, f"bytes 10-{len(TEXT) - 1}/{len(TEXT)}", TEXT[10:]),
        ("bytes=-5", 206, f"bytes {len(TEXT) - 5}-{len(TEXT) - 1}/{len(TEXT)}", TEXT[-5:]),
        ("bytes=5-100000", 206, f"bytes 5-{len(TEXT) - 1}/{len(TEXT)}", TEXT[5:]),
        # Several ranges, or one that does not parse: the whole file (RFC 9110 §14.2).
        ("bytes=0-1,4-5", 200, None, TEXT),
        ("pages=1-2", 200, None, TEXT),
        ("bytes=9-3", 200, None, TEXT),
    ],
)
def test_a_byte_range_is_served(api, run, header, status, content_range, expected):
    artifact = upload(api, run.pk, TEXT).json()
    response = api.get(content_url(artifact["id"]), HTTP_RANGE=header)
    assert response.status_code == status
    assert response.get("Content-Range") == content_range
    assert body_of(response) == expected
    assert response["Content-Length"] == str(len(expected))


def test_a_range_past_the_end_is_416_and_a_stale_if_range_gets_the_whole_file(api, run):
    artifact = upload(api, run.pk, TEXT).json()
    past = api.get(content_url(artifact["id"]), HTTP_RANGE=f"bytes={len(TEXT)}-")
    assert past.status_code == 416
    assert past["Content-Range"] == f"bytes */{len(TEXT)}"
    stale = api.get(content_url(artifact["id"]), HTTP_RANGE="bytes=0-3", HTTP_IF_RANGE='"old"')
    assert (stale.status_code, body_of(stale)) == (200, TEXT)
    current = api.get(
        content_url(artifact["id"]), HTTP_RANGE="bytes=0-3", HTTP_IF_RANGE=f'"{artifact["sha256"]}"'
    )
    assert (current.status_code, body_of(current)) == (206, TEXT[:4])


@pytest.mark.parametrize(
    ("content", "declared", "served", "disposition"),
    [
        (
            b"<html><script>alert(1)</script></html>",
            "text/html",
            "text/plain; charset=utf-8",
            "inline",
        ),
        (
            b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
            "image/svg+xml",
            "text/plain; charset=utf-8",
            "inline",
        ),
        (b'{"a": [1, 2]}', "application/json", "application/json", "inline"),
        (PNG, "image/png", "image/png", "inline"),
        (b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n", "application/pdf", "application/pdf", "inline"),
        (
            b"\x00\x01\x02\x03binary",
            "application/octet-stream",
            "application/octet-stream",
            "attachment",
        ),
        (b"PK\x03\x04" + b"\x00" * 40, "application/zip", "application/octet-stream", "attachment"),
    ],
)
def test_the_sniffed_type_decides_how_content_is_served(
    api, run, content, declared, served, disposition
):
    response = upload(api, run.pk, content, declared, name="file")
    assert response.status_code == 201, response.json()
    served_response = api.get(content_url(response.json()["id"]))
    assert served_response["Content-Type"] == served
    assert served_response["Content-Disposition"].startswith(disposition)
    assert served_response["X-Content-Type-Options"] == "nosniff"
    csp = served_response["Content-Security-Policy"]
    assert "default-src 'none'" in csp
    assert ("sandbox" in csp) == (served != "application/pdf")


@pytest.mark.parametrize(
    ("content", "declared"),
    [
        # HTML (or SVG) passed off as an image, an image as text, text as PDF.
        (b"<html><script>alert(1)</script></html>", "image/png"),
        (b'<svg xmlns="http://www.w3.org/2000/svg"/>', "image/jpeg"),
        (PNG, "text/plain"),
        (b"just text\n", "application/pdf"),
        (b"<html><body>x</body></html>", "application/json"),
        # Unknown bytes passed off as something a browser would show.
        (b"\x00\x01\x02\x03", "image/png"),
        (b"\x00\x01\x02\x03", "text/plain"),
    ],
)
def test_content_that_is_not_its_declared_type_is_refused(
    api, run, artifact_dir, content, declared
):
    with assert_unchanged():
        response = upload(api, run.pk, content, declared)
    assert response.status_code == 400
    assert response.json()["field"] == "content_type"
    assert stored_files(artifact_dir) == []


@pytest.mark.parametrize(
    ("content", "declared"),
    [
        (b"a,b\n1,2\n", "text/csv"),
        (b"# Title\n", "text/markdown"),
        (b"raw", "application/octet-stream"),
    ],
)
def test_generic_text_may_be_declared_as_a_text_type(api, run, content, declared):
    response = upload(api, run.pk, content, declared)
    assert response.status_code == 201, response.json()
    assert response.json()["declared_type"] == declared


def test_bad_queries_and_media_types_are_refused(api, run, artifact_dir):
    with assert_unchanged():
        assert upload(api, run.pk, TEXT, "not a type").status_code == 400
        assert upload(api, run.pk, TEXT, name="..").status_code == 400
        assert (
            api.post(f"{ARTIFACTS_URL}?name=x", data=TEXT, content_type="text/plain").status_code
            == 400
        )
        assert upload(api, "not-a-uuid", TEXT).status_code == 400
        assert upload(api, run.pk, TEXT, extra="1").status_code == 400
    assert stored_files(artifact_dir) == []


def test_an_upload_over_the_limit_is_413_and_keeps_nothing(api, run, settings, artifact_dir):
    settings.AGENTOPS_ARTIFACT_MAX_BYTES = 100
    with assert_unchanged():
        response = upload(api, run.pk, b"x" * 101)
    assert response.status_code == 413
    assert "100 bytes" in response.json()["detail"]
    assert upload(api, run.pk, b"x" * 100).status_code == 201
    # A project's own limit replaces the setting there.
    ArtifactLimit.objects.create(project_id=run.project_id, max_bytes=10_000)
    assert upload(api, run.pk, b"x" * 5000).status_code == 201
    assert len(stored_files(artifact_dir)) == 2


def test_a_body_shorter_than_its_length_keeps_nothing(run, artifact_dir):
    with assert_unchanged(), pytest.raises(InvalidInput, match="10 bytes came of the 20"):
        artifact_upload(
            run_id=run.pk,
            name="short.txt",
            declared_type="text/plain",
            stream=io.BytesIO(b"0123456789"),
            content_length=20,
            actor=Actor.system(),
        )
    assert stored_files(artifact_dir) == []


def test_delete_removes_the_row_and_after_the_commit_the_file(
    api, run, artifact_dir, django_capture_on_commit_callbacks
):
    artifact = upload(api, run.pk, TEXT).json()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api.delete(f"{ARTIFACTS_URL}{artifact['id']}/?reason=wrong file")
    assert response.status_code == 204
    assert not Artifact.objects.filter(pk=artifact["id"]).exists()
    # Still there until the transaction's on-commit work runs.
    assert len(stored_files(artifact_dir)) == 1
    for callback in callbacks:
        callback()
    assert stored_files(artifact_dir) == []
    event = AuditEvent.objects.get(verb="artifact.deleted")
    assert event.payload["reason"] == "wrong file"
    assert event.payload["sha256"] == artifact["sha256"]
    assert api.delete(f"{ARTIFACTS_URL}{artifact['id']}/").status_code == 404


def test_other_projects_artifacts_are_404_and_viewers_may_not_write(
    api, run, artifact_dir, django_capture_on_commit_callbacks
):
    artifact = upload(api, run.pk, TEXT).json()
    elsewhere = Project.objects.create(slug="elsewhere", name="Elsewhere")
    stranger = make_user("stella", Role.OPERATOR, project=elsewhere)
    stranger_api = token_client(stranger, elsewhere)
    with assert_unchanged():
        for response in (
            stranger_api.get(f"{ARTIFACTS_URL}{artifact['id']}/"),
            stranger_api.get(content_url(artifact["id"])),
            stranger_api.delete(f"{ARTIFACTS_URL}{artifact['id']}/"),
            upload(stranger_api, run.pk, b"planted\n"),
        ):
            assert response.status_code == 404, response
        assert stranger_api.get(ARTIFACTS_URL).json()["results"] == []
    # A token of another project is confined to it, even for a member of both.
    membership_set(project=run.project, user=stranger, role=Role.OPERATOR)
    confined_api = token_client(stranger, elsewhere)
    with assert_unchanged():
        assert confined_api.get(content_url(artifact["id"])).status_code == 404
    assert token_client(stranger).get(content_url(artifact["id"])).status_code == 200
    viewer = make_user("vera", Role.VIEWER)
    viewer_api = token_client(viewer)
    assert viewer_api.get(content_url(artifact["id"])).status_code == 200
    with assert_unchanged():
        assert upload(viewer_api, run.pk, b"x\n").status_code == 403
        assert viewer_api.delete(f"{ARTIFACTS_URL}{artifact['id']}/").status_code == 403
    assert len(stored_files(artifact_dir)) == 1
    assert Run.objects.filter(pk=run.pk).exists()


def test_a_missing_or_resized_file_is_409_before_any_byte(api, run, artifact_dir):
    artifact = upload(api, run.pk, TEXT).json()
    path = artifact_dir / Artifact.objects.get(pk=artifact["id"]).storage_name
    path.write_bytes(TEXT[:10])
    cut = api.get(content_url(artifact["id"]))
    assert cut.status_code == 409
    assert "10 bytes, not the" in cut.json()["detail"]
    path.unlink()
    missing = api.get(content_url(artifact["id"]))
    assert missing.status_code == 409
    assert "missing" in missing.json()["detail"]
