"""Reads of artifacts that pages, the API and commands share."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from django.db.models import QuerySet

from artifacts import storage
from artifacts.media import is_text
from artifacts.models import Artifact

# Bytes of a text artifact a run page's preview shows.
PREVIEW_BYTES = 4096


def artifact_list(*, run_id: uuid.UUID | None = None) -> QuerySet[Artifact]:
    """Artifacts, newest first; of run ``run_id`` when given."""
    artifacts = Artifact.objects.all()
    if run_id is not None:
        artifacts = artifacts.filter(run_id=run_id)
    return artifacts.order_by("-created_at", "-id")


def run_artifacts(*, run_id: uuid.UUID) -> list[Artifact]:
    """The artifacts of run ``run_id`` a run page lists (oldest first, as its steps)."""
    return list(
        Artifact.objects.filter(run_id=run_id).select_related("step").order_by("created_at", "id")
    )


@dataclass(frozen=True)
class Preview:
    """The start of a text artifact: ``text`` (UTF-8, undecodable bytes replaced),
    ``truncated`` when the file goes on; ``error`` instead when its file cannot be read."""

    text: str = ""
    truncated: bool = False
    error: str = ""


def artifact_preview(*, artifact: Artifact) -> Preview:
    """The first ``PREVIEW_BYTES`` bytes of ``artifact`` as text (for text, JSON and other
    readable types; an empty preview for the rest). A file that cannot be read is reported
    in ``error``, never raised: a page must show whatever the storage holds."""
    if not is_text(artifact.sniffed_type):
        return Preview()
    try:
        data = b"".join(storage.read_chunks(artifact.storage_name, 0, PREVIEW_BYTES))
    except Exception as exc:
        # Each storage backend raises its own errors: whatever it raised is reported.
        return Preview(error=f"the file cannot be read ({type(exc).__name__})")
    return Preview(
        text=data.decode("utf-8", errors="replace"), truncated=artifact.size > PREVIEW_BYTES
    )


@dataclass(frozen=True)
class Finding:
    """A stored artifact whose file is ``missing`` or ``altered`` (``detail`` says how)."""

    artifact: Artifact
    problem: str
    detail: str


def artifact_findings(artifacts: QuerySet[Artifact]) -> Iterator[Finding]:
    """Each of ``artifacts`` whose file is missing or unreadable, or whose size or SHA-256
    differs from the one recorded when it was uploaded (every file is read whole, in
    chunks)."""
    for artifact in artifacts.order_by("created_at", "id").iterator(chunk_size=500):
        digest = hashlib.sha256()
        size = 0
        try:
            for chunk in storage.read_chunks(artifact.storage_name):
                digest.update(chunk)
                size += len(chunk)
        except Exception as exc:  # each storage backend raises its own errors
            yield Finding(artifact, "missing", f"{type(exc).__name__}: {exc}")
            continue
        if size != artifact.size or digest.hexdigest() != artifact.sha256:
            yield Finding(
                artifact,
                "altered",
                f"{size} bytes, sha256 {digest.hexdigest()} (recorded: {artifact.size} bytes, "
                f"sha256 {artifact.sha256})",
            )
