"""Artifacts tests: the artifacts storage in a directory of the test's own, a client run of
the default project, and upload and download helpers over the API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from runs.models import Run
from testsupport.factories import make_run

ARTIFACTS_URL = "/api/v1/artifacts/"
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360"
    "00000000050001a5f645400000000049454e44ae426082"
)
HTML = b"<!doctype html><html><body><script>window.__pwned = 1</script>hello</body></html>"
SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">'
    b"<script>window.__pwned = 1</script></svg>"
)


@pytest.fixture(autouse=True)
def artifact_dir(settings, tmp_path: Path) -> Path:
    """The artifacts storage: a fresh directory for each test."""
    location = tmp_path / "artifacts"
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(location)},
        },
    }
    return location


@pytest.fixture
def run(operator, django_capture_on_commit_callbacks) -> Run:
    return make_run(
        operator, agent="client", goal="write a report", capture=django_capture_on_commit_callbacks
    )


def upload(
    api: APIClient,
    run_id: Any,
    content: bytes,
    content_type: str = "text/plain",
    name: str = "notes.txt",
    **query: Any,
) -> Any:
    """POST ``content`` as an artifact of run ``run_id``; the response."""
    params = {"run": str(run_id), "name": name, **query}
    query_string = "&".join(f"{key}={value}" for key, value in params.items())
    return api.post(f"{ARTIFACTS_URL}?{query_string}", data=content, content_type=content_type)


def content_url(artifact_id: Any, query: str = "") -> str:
    return f"{ARTIFACTS_URL}{artifact_id}/content/{query}"


def body_of(response: Any) -> bytes:
    """The whole body of a (streaming or plain) response."""
    if response.streaming:
        return b"".join(response.streaming_content)
    return bytes(response.content)


def stored_files(location: Path) -> list[Path]:
    """The files in the artifacts storage."""
    return sorted(path for path in location.rglob("*") if path.is_file())
