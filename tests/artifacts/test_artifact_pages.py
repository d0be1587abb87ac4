"""The run page lists a run's artifacts; a text artifact's preview is escaped text (whatever
markup it holds), a missing file says so instead of failing the page, and another project's
artifact is a 404."""

from __future__ import annotations

import io

import pytest
from django.urls import reverse

from agentops.actors import Actor
from artifacts.services import artifact_upload
from projects.models import Project
from projects.roles import Role
from testsupport.factories import make_user

pytestmark = pytest.mark.django_db


def _upload(run, content: bytes, name: str, declared: str = "text/plain"):
    return artifact_upload(
        run_id=run.pk,
        name=name,
        declared_type=declared,
        stream=io.BytesIO(content),
        actor=Actor.system(),
    )


def test_the_run_page_lists_artifacts_and_previews_text_escaped(
    client, operator, run, artifact_dir
):
    page_html = _upload(run, b"<script>alert(1)</script><b>bold</b>\n", "page.html", "text/html")
    notes = _upload(run, b"x" * 5000, "long.txt")
    client.force_login(operator)
    html = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "Artifacts (2)" in html
    assert f'id="artifact-{page_html.pk}"' in html
    assert reverse("artifact-preview", args=[notes.pk]) in html
    preview = client.get(reverse("artifact-preview", args=[page_html.pk]))
    assert preview.status_code == 200
    body = preview.content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "<script>" not in body
    long_preview = client.get(reverse("artifact-preview", args=[notes.pk])).content.decode()
    assert "The first 4096 characters of 5000 bytes" in long_preview
    (artifact_dir / notes.storage_name).unlink()
    missing = client.get(reverse("artifact-preview", args=[notes.pk]))
    assert missing.status_code == 200
    assert "the file cannot be read" in missing.content.decode()
    assert client.get(reverse("run-detail", args=[run.pk])).status_code == 200


def test_another_projects_preview_is_404(client, run):
    notes = _upload(run, b"secret\n", "secret.txt")
    elsewhere = Project.objects.create(slug="elsewhere", name="Elsewhere")
    client.force_login(make_user("stella", Role.OPERATOR, project=elsewhere))
    assert client.get(reverse("artifact-preview", args=[notes.pk])).status_code == 404
