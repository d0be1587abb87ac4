"""The only functions that change artifacts: upload, delete, and the offloading of a step
result too large to keep in the step.

A file is written to the storage outside any transaction (it may take minutes); its row and
audit event are then written in one transaction that holds the run's row lock (the run's
audit chain needs it). A file whose row was never committed is deleted at once; a deleted
row's file after the commit.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
import uuid
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import orjson
from django.apps import apps
from django.conf import settings
from django.db import IntegrityError, transaction
from django.urls import reverse

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput, TooLarge
from artifacts import storage
from artifacts.media import is_shown, is_text
from artifacts.models import Artifact, ArtifactLimit
from audit.services import audit_record, audited_atomic

logger = logging.getLogger(__name__)

# A media type as a client declares it (RFC 9110 §8.3.1), parameters left out.
_MEDIA_TYPE = re.compile(r"^[a-z0-9!#$&^_.+-]{1,127}/[a-z0-9!#$&^_.+-]{1,127}$")
# Declared types that say nothing about the content: whatever is sniffed is accepted.
_UNDECLARED = {"application/octet-stream", "binary/octet-stream"}
# Sniffed text that says little: accepted for any declared text type but HTML.
_GENERIC_TEXT = {"text/plain", "application/json"}
# Bytes of a file name at most (as stored); control characters and path parts are dropped.
_NAME_CHARS = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _runs_model(name: str) -> Any:
    # The runs app sits above this one (import-linter layers): its models are reached by name.
    return apps.get_model("runs", name)


def _lock_run(run_id: uuid.UUID) -> None:
    """Lock run ``run_id``'s row (its audit chain's writers hold it; lock order:
    ``runs.transitions``, the run first)."""
    list(_runs_model("Run").objects.select_for_update().filter(pk=run_id).values_list("pk"))


def clean_name(name: str) -> str:
    """``name`` as stored: its last path part, without control characters, at most 255
    characters.

    Raises:
        InvalidInput: nothing is left.
    """
    cleaned = _CONTROL.sub("", name).replace("\\", "/").rsplit("/", 1)[-1].strip()
    if cleaned in ("", ".", ".."):
        raise InvalidInput("name the file (name=report.pdf)", field="name")
    return cleaned[:_NAME_CHARS]


def clean_media_type(declared: str) -> str:
    """``declared`` (a Content-Type header) without its parameters, lower case; an absent one
    is ``application/octet-stream``.

    Raises:
        InvalidInput: not a media type.
    """
    media = declared.split(";", 1)[0].strip().lower() or "application/octet-stream"
    if not _MEDIA_TYPE.match(media):
        raise InvalidInput(f"{declared[:100]!r} is not a media type", field="content_type")
    return media


def type_matches(declared: str, sniffed: str) -> bool:
    """Whether content sniffed as ``sniffed`` may be declared ``declared``: the same type; or
    no real declaration (``application/octet-stream``); or text that libmagic can only call
    ``text/plain`` (CSV, Markdown, NDJSON, a JSON fragment) declared as a text type; or bytes
    libmagic does not know declared as a type that is offered as a file anyway (an archive,
    a data format); or an empty file. HTML or SVG declared as anything else, an image that is
    not one, are not."""
    if declared == sniffed or declared in _UNDECLARED or sniffed == "application/x-empty":
        return True
    if sniffed in _GENERIC_TEXT:
        return is_text(declared) and declared != "text/html"
    if sniffed == "application/octet-stream":
        return not is_shown(declared)
    return False


def project_limit(project_id: int) -> int:
    """The largest artifact project ``project_id`` accepts (bytes): its ``ArtifactLimit``,
    else ``settings.AGENTOPS_ARTIFACT_MAX_BYTES``."""
    limit = (
        ArtifactLimit.objects.filter(project_id=project_id)
        .values_list("max_bytes", flat=True)
        .first()
    )
    return limit if limit is not None else settings.AGENTOPS_ARTIFACT_MAX_BYTES


def run_project_id(run_id: uuid.UUID) -> int | None:
    """The project of run ``run_id`` (None: no such run)."""
    project_id: int | None = (
        _runs_model("Run").objects.filter(pk=run_id).values_list("project_id", flat=True).first()
    )
    return project_id


def _run_and_step(run_id: uuid.UUID, step_id: int | None) -> tuple[int, uuid.UUID | None, int]:
    """``(project id, session id, step index)`` of run ``run_id`` and its step ``step_id``
    (index -1 without one).

    Raises:
        Run.DoesNotExist, Step.DoesNotExist: no such run, or no such step in it.
    """
    run_model = _runs_model("Run")
    found = run_model.objects.filter(pk=run_id).values_list("project_id", "session_id").first()
    if found is None:
        raise run_model.DoesNotExist(f"no run {run_id}")
    index = -1
    if step_id is not None:
        step_model = _runs_model("Step")
        index = (
            step_model.objects.filter(pk=step_id, run_id=run_id)
            .values_list("index", flat=True)
            .first()
        )
        if index is None:
            raise step_model.DoesNotExist(f"run {run_id} has no step {step_id}")
    return found[0], found[1], index


def artifact_upload(
    *,
    run_id: uuid.UUID,
    step_id: int | None = None,
    name: str,
    declared_type: str,
    stream: Any,
    content_length: int | None = None,
    actor: Actor,
    kind: str = Artifact.Kind.UPLOAD,
    limit: int | None = None,
    idempotency_key: str = "",
) -> Artifact:
    """Store the file read from ``stream`` (anything with ``read(n)``, read in chunks: never
    all in memory) as an artifact of run ``run_id`` (and of its step ``step_id``, and of the
    run's session), uploaded by ``actor``; audited ``artifact.uploaded``.

    ``name`` is the file name shown (cleaned: ``clean_name``); ``declared_type`` the
    uploader's Content-Type, checked against the type sniffed from the first 8 KiB
    (``type_matches``); ``content_length`` the body's announced length in bytes (None: not
    announced), refused early when over the limit and checked against what came; ``limit``
    (bytes) replaces the project's (``project_limit``); ``idempotency_key`` is kept with it
    (``artifact_upload_once``).

    Raises:
        Run.DoesNotExist, Step.DoesNotExist: no such run, or no such step in it.
        TooLarge: over the project's limit (nothing is kept).
        InvalidInput: a bad name or media type, content that is not what it is declared
            to be, or fewer or more bytes than announced (nothing is kept).
    """
    project_id, session_id, _ = _run_and_step(run_id, step_id)
    name = clean_name(name)
    declared = clean_media_type(declared_type)
    limit = project_limit(project_id) if limit is None else limit
    if content_length is not None and content_length > limit:
        raise TooLarge(f"the artifact exceeds this project's limit of {limit} bytes")
    reader = storage.HashingReader(stream, limit=limit)
    sniffed = storage.sniff(reader.head)
    if not type_matches(declared, sniffed):
        raise InvalidInput(
            f"the content is {sniffed}, not the declared {declared}", field="content_type"
        )
    artifact_id = uuid.uuid4()
    stored = f"{project_id}/{run_id}/{artifact_id}"
    try:
        stored = storage.store(stored, reader)
        if content_length is not None and reader.size != content_length:
            raise InvalidInput(
                f"{reader.size} bytes came of the {content_length} announced", field="body"
            )
        artifact = Artifact(
            id=artifact_id,
            project_id=project_id,
            run_id=run_id,
            step_id=step_id,
            session_id=session_id,
            kind=kind,
            name=name,
            declared_type=declared,
            sniffed_type=sniffed,
            size=reader.size,
            sha256=reader.sha256,
            storage_name=stored,
            actor_kind=actor.kind,
            actor_id=actor.id,
            actor_name=actor.name,
            idempotency_key=idempotency_key,
        )
        with audited_atomic():
            _lock_run(run_id)
            artifact.save(force_insert=True)
            audit_record(
                actor=actor,
                verb="artifact.uploaded",
                object_type="artifact",
                object_id=artifact.pk,
                run_id=run_id,
                project_id=project_id,
                payload=_described(artifact),
            )
    except BaseException:
        # Nothing was committed: the file (or what was written of it) must not stay.
        storage.delete_files([stored])
        raise
    return artifact


class KeyReused(Exception):
    """An ``Idempotency-Key`` already named another upload (HTTP 422)."""


@dataclass(frozen=True)
class Uploaded:
    """What ``artifact_upload_once`` did: the artifact, and whether it was there already
    (``replayed``: nothing was stored)."""

    artifact: Artifact
    replayed: bool


def artifact_upload_once(
    *,
    idempotency_key: str,
    run_id: uuid.UUID,
    step_id: int | None = None,
    name: str,
    declared_type: str,
    stream: Any,
    content_length: int | None = None,
    actor: Actor,
) -> Uploaded:
    """``artifact_upload`` under ``idempotency_key`` (1 to 255 visible ASCII characters, as
    the API's other ``Idempotency-Key`` headers): the first upload of the key by ``actor`` in
    the run's project stores the artifact; a later one with the same run, step, name, declared
    type and bytes (read and hashed, never stored) gets the same artifact (``replayed``);
    with anything else, ``KeyReused``. The key lasts as long as its artifact.

    Raises:
        KeyReused: the key names an upload of something else.
        Conflict: an upload with the key committed while this one was being stored (this
            one is dropped; a retry gets the other's artifact).
        as ``artifact_upload``.
    """
    # No such run: ``artifact_upload`` says so.
    project_id = run_project_id(run_id)
    earlier = None
    if project_id is not None:
        earlier = Artifact.objects.filter(
            project_id=project_id,
            actor_kind=actor.kind,
            actor_id=actor.id,
            idempotency_key=idempotency_key,
        ).first()
    if earlier is None:
        try:
            artifact = artifact_upload(
                run_id=run_id,
                step_id=step_id,
                name=name,
                declared_type=declared_type,
                stream=stream,
                content_length=content_length,
                actor=actor,
                idempotency_key=idempotency_key,
            )
        except IntegrityError:
            # ``artifact_idempotency_key_uniq``: a concurrent upload of the key won.
            raise Conflict(
                "an upload with this Idempotency-Key was being processed: retry it"
            ) from None
        return Uploaded(artifact=artifact, replayed=False)
    same = (
        earlier.run_id == run_id
        and earlier.step_id == step_id
        and earlier.name == clean_name(name)
        and earlier.declared_type == clean_media_type(declared_type)
        and content_length in (None, earlier.size)
    )
    if same:
        try:
            reader = storage.HashingReader(stream, limit=earlier.size)
            while reader.read(storage.CHUNK_BYTES):
                pass
        except TooLarge:
            same = False
        else:
            same = (reader.size, reader.sha256) == (earlier.size, earlier.sha256)
    if not same:
        raise KeyReused("this Idempotency-Key was already used for a different upload")
    return Uploaded(artifact=earlier, replayed=True)


def _described(artifact: Artifact) -> dict[str, Any]:
    """What an artifact's audit events record of it."""
    return {
        "name": artifact.name,
        "size": artifact.size,
        "sha256": artifact.sha256,
        "sniffed_type": artifact.sniffed_type,
        "step_id": artifact.step_id,
        "kind": artifact.kind,
    }


def artifact_open(
    *, artifact: Artifact, start: int = 0, stop: int | None = None
) -> Generator[bytes, None, None]:
    """The bytes ``start`` to ``stop`` (exclusive; None: the end) of ``artifact``'s file, in
    chunks of at most 256 KiB (``storage.read_chunks``). The caller has checked the reader's
    permission in the artifact's project.

    Checked first (before a response starts, which could only be cut off): the stored file
    exists and has the recorded size. Its content is checked by its reader (``sha256``) or
    ``manage.py verify_artifacts``.

    Raises:
        Conflict: the stored file is missing or not the recorded size (it was altered).
        OSError or the storage's own error: the file cannot be read (once started).
    """
    size = storage.stored_size(artifact.storage_name)
    if size != artifact.size:
        found = "missing" if size is None else f"{size} bytes, not the {artifact.size} recorded"
        raise Conflict(
            f"the stored file of artifact {artifact.pk} is {found}: an operator can list "
            "the damaged files with manage.py verify_artifacts"
        )
    return storage.read_chunks(
        artifact.storage_name, start, artifact.size if stop is None else stop
    )


def artifact_delete(*, artifact_id: uuid.UUID, actor: Actor, reason: str = "") -> None:
    """Delete artifact ``artifact_id`` (audited ``artifact.deleted``, with ``reason``), and
    its file once the deletion committed.

    Raises:
        Artifact.DoesNotExist: no such artifact (or it was deleted meanwhile).
    """
    with audited_atomic():
        run_id = Artifact.objects.values_list("run_id", flat=True).get(pk=artifact_id)
        _lock_run(run_id)
        artifact = Artifact.objects.select_for_update().get(pk=artifact_id)
        artifact.delete()
        audit_record(
            actor=actor,
            verb="artifact.deleted",
            object_type="artifact",
            object_id=artifact_id,
            run_id=run_id,
            project_id=artifact.project_id,
            payload={**_described(artifact), "reason": reason},
        )
        delete_files_on_commit([artifact.storage_name])


def delete_files_on_commit(names: list[str]) -> None:
    """Delete the stored files ``names`` once the current transaction commits (never before:
    a rolled back deletion keeps its rows, which must keep their files)."""
    if names:
        transaction.on_commit(lambda: storage.delete_files(names))


def result_reference(artifact: Artifact) -> dict[str, Any]:
    """What a step keeps instead of a result stored as ``artifact``: ``{"$artifact": id,
    "sha256": hex, "size": bytes, "content_type": ..., "href": its download path}``."""
    return {
        "$artifact": str(artifact.pk),
        "sha256": artifact.sha256,
        "size": artifact.size,
        "content_type": "application/json",
        "href": reverse("api-artifact-content", args=[artifact.pk]),
    }


def offload_large_result(*, run_id: uuid.UUID, step_id: int, result: Any, actor: Actor) -> Any:
    """``result`` of step ``step_id`` (run ``run_id``) as the step should keep it: itself
    when its JSON is at most ``settings.AGENTOPS_ARTIFACT_RESULT_THRESHOLD_BYTES`` bytes (or
    the threshold is 0, or it is not JSON: the caller refuses it), else a reference
    (``result_reference``) to an artifact holding its JSON, which this stores (the project's
    size limit does not apply: the result was already taken).

    Called before the transaction that records the result (the file is written outside it).
    The same result of the same step gives the same artifact (found by its SHA-256), so a
    repeated report or a retried recording keeps one file and compares equal.

    A storage that fails leaves the result in the step, whole (logged).

    Raises:
        Run.DoesNotExist, Step.DoesNotExist: no such run, or no such step in it.
    """
    threshold: int = settings.AGENTOPS_ARTIFACT_RESULT_THRESHOLD_BYTES
    if not threshold:
        return result
    try:
        data = orjson.dumps(result, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return result
    if len(data) <= threshold:
        return result
    existing = Artifact.objects.filter(
        step_id=step_id, kind=Artifact.Kind.RESULT, sha256=hashlib.sha256(data).hexdigest()
    ).first()
    if existing is not None:
        return result_reference(existing)
    _, _, index = _run_and_step(run_id, step_id)
    try:
        artifact = artifact_upload(
            run_id=run_id,
            step_id=step_id,
            name=f"step-{index}-result.json",
            declared_type="application/json",
            stream=io.BytesIO(data),
            content_length=len(data),
            actor=actor,
            kind=Artifact.Kind.RESULT,
            limit=len(data),
        )
    except Exception:
        # The tool's result is known only here: a storage that fails must not lose it. The
        # step keeps it whole instead.
        logger.exception("step %s: its result could not be stored as an artifact", step_id)
        return result
    return result_reference(artifact)
