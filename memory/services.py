"""The only writers of memory items: put and delete (LangGraph ``BaseStore.put`` and
``delete``), each serialized per item by its row lock, kept as a ``MemoryVersion`` and
audited with the value before and after in the item's chain (``memory:<item id>``).

Every write may name the version it was made against (``if_match``: the item's ETag,
``memory.models.item_etag``); a write against any other version changes nothing
(``PreconditionFailed``), so two agents writing one item never lose an update.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

import orjson
from django.db import IntegrityError, transaction
from django.utils import timezone

from agentops.actors import Actor
from agentops.errors import InvalidInput, PreconditionFailed, TooLarge
from agentops.storable import require_storable
from audit.services import audit_record, audited_atomic
from memory.models import MemoryItem, MemoryOperation, MemoryVersion, memory_chain
from memory.namespaces import namespace_labels, namespace_path
from memory.provenance import NONE, Provenance
from memory.rows import item_rows
from projects.models import Project

# Limits of one item (the value's canonical JSON in bytes, UTF-8; the rest in characters).
MAX_VALUE_BYTES: Final = 256 * 1024
MAX_KEY_CHARS: Final = 500
MAX_TEXT_CHARS: Final = 100_000
MAX_TAGS: Final = 50
MAX_TAG_CHARS: Final = 100
MAX_REASON_CHARS: Final = 2000
# The longest time to live: ten years, in seconds.
MAX_TTL_SECONDS: Final = 10 * 365 * 24 * 3600


@dataclass(frozen=True)
class Written:
    """What a put did: the item as written, and whether it was created (not replaced)."""

    item: MemoryItem
    created: bool


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)


def search_text(value: dict[str, Any], text: str | None) -> str:
    """What full-text search reads of an item: ``text`` when the client gave it, else the
    value's strings (its leaves, in order), cut to ``MAX_TEXT_CHARS``."""
    if text is not None:
        return text
    found: list[str] = []
    _strings(value, found)
    return "\n".join(found)[:MAX_TEXT_CHARS]


def _check_item(
    key: Any, value: Any, text: Any, tags: Any, ttl_seconds: Any, expires_at: Any, now: datetime
) -> None:
    if not isinstance(key, str) or not key:
        raise InvalidInput("key must be a non-empty string", field="key")
    require_storable(key, field="key", max_length=MAX_KEY_CHARS)
    if not isinstance(value, dict):
        raise InvalidInput("value must be a JSON object", field="value")
    require_storable(value, field="value")
    if len(orjson.dumps(value)) > MAX_VALUE_BYTES:
        raise TooLarge(f"value is over {MAX_VALUE_BYTES} bytes of JSON", field="value")
    if text is not None:
        if not isinstance(text, str):
            raise InvalidInput("text must be a string", field="text")
        require_storable(text, field="text", max_length=MAX_TEXT_CHARS)
    if not isinstance(tags, list) or len(tags) > MAX_TAGS:
        raise InvalidInput(f"tags must be a list of at most {MAX_TAGS} strings", field="tags")
    for tag in tags:
        if not isinstance(tag, str) or not tag:
            raise InvalidInput("tags must be non-empty strings", field="tags")
        require_storable(tag, field="tags", max_length=MAX_TAG_CHARS)
    if ttl_seconds is not None and expires_at is not None:
        raise InvalidInput("give ttl_seconds or expires_at, not both", field="ttl_seconds")
    if ttl_seconds is not None and (
        isinstance(ttl_seconds, bool)
        or not isinstance(ttl_seconds, int)
        or not 1 <= ttl_seconds <= MAX_TTL_SECONDS
    ):
        raise InvalidInput(
            f"ttl_seconds must be a whole number from 1 to {MAX_TTL_SECONDS}", field="ttl_seconds"
        )
    if expires_at is not None and (
        not isinstance(expires_at, datetime) or timezone.is_naive(expires_at) or expires_at <= now
    ):
        raise InvalidInput("expires_at must be an aware time in the future", field="expires_at")


def _check_if_match(item: MemoryItem | None, if_match: str | None) -> None:
    """Raise ``PreconditionFailed`` unless ``if_match`` (None: no condition; ``*``: any
    current item) names ``item``'s current version (strong comparison, RFC 9110 §13.1.1)."""
    if if_match is None:
        return
    if item is not None and if_match in ("*", item.etag):
        return
    current = item.version if item is not None else 0
    etag = item.etag if item is not None else '""'
    what = f"version {current}" if item is not None else "no item"
    raise PreconditionFailed(
        f"If-Match {if_match} is not the item's current version (there is {what})",
        version=current,
        etag=etag,
    )


def _record(
    *,
    actor: Actor,
    item: MemoryItem,
    operation: str,
    before: dict[str, Any] | None,
    provenance: Provenance,
    reason: str = "",
    now: datetime,
) -> MemoryVersion:
    """Keep the version ``item`` is at after ``operation`` and audit it (before and after)."""
    after = item.value if operation == MemoryOperation.PUT else None
    kept = MemoryVersion(
        item_id=item.pk,
        project_id=item.project_id,
        namespace_path=item.namespace_path,
        key=item.key,
        version=item.version,
        operation=operation,
        value=item.value,
        text=item.text,
        tags=item.tags,
        expires_at=item.expires_at,
        reason=reason,
        subject=item.subject,
        run_id=provenance.run_id,
        step_id=provenance.step_id,
        step_index=provenance.step_index,
        session_id=provenance.session_id,
        source_message_id=provenance.source_message_id,
        actor_kind=actor.kind,
        actor_id=actor.id,
        actor_name=actor.name,
        created_at=now,
    )
    item_rows().insert(kept)
    payload: dict[str, Any] = {
        "namespace": list(item.namespace),
        "key": item.key,
        "version": item.version,
        "before": before,
        "after": after,
    }
    if reason:
        payload["reason"] = reason
    if provenance.run_id is not None:
        payload["run"] = str(provenance.run_id)
        payload["step_index"] = provenance.step_index
    audit_record(
        actor=actor,
        verb=f"memory.{operation}",
        object_type="memory_item",
        object_id=item.pk,
        project_id=item.project_id,
        chain=memory_chain(item.pk),
        payload=payload,
    )
    return kept


def _expire_locked(item: MemoryItem, now: datetime) -> None:
    """Delete ``item`` (locked, expired) as the purge would, recording its expiry."""
    _record(
        actor=Actor.system("memory expiry"),
        item=item,
        operation=MemoryOperation.EXPIRE,
        before=item.value,
        provenance=NONE,
        now=now,
    )
    item.delete()


def _live_locked(
    project: Project, path: str, key: str, now: datetime, new_chain: str = ""
) -> MemoryItem | None:
    """The item at ``path``/``key``, locked; an expired one is deleted first (None). With
    ``new_chain``, the head of the chain a new item would have is read with it."""
    rows = item_rows()
    item = rows.locked_item(project_id=project.pk, path=path, key=key, new_chain=new_chain)
    if item is not None and item.expires_at is not None and item.expires_at <= now:
        _expire_locked(item, now)
        return None
    return item


def memory_put(
    *,
    actor: Actor,
    project: Project,
    namespace: Any,
    key: Any,
    value: Any,
    text: Any = None,
    tags: Any = None,
    ttl_seconds: Any = None,
    expires_at: Any = None,
    subject: Any = None,
    if_match: str | None = None,
    provenance: Provenance = NONE,
) -> Written:
    """Create or replace the item ``key`` (1-500 characters) in ``namespace`` (labels:
    ``memory.namespaces.namespace_labels``) of ``project`` with ``value`` (a JSON object of
    up to 256 KiB), as LangGraph's ``BaseStore.put``.

    ``text`` (up to 100,000 characters) is what full-text search reads (default: the value's
    strings); ``tags`` a list of up to 50 strings; ``ttl_seconds`` (1 s to 10 years) or
    ``expires_at`` (an aware future time) end the item (neither: it never expires);
    ``subject`` (up to 200 characters; default: the provenance's session's, else the
    replaced item's) names the end user it is about, for erasure. ``if_match`` (an ETag, or
    ``*``) makes the write conditional. ``provenance`` (``memory.provenance.provenance_of``)
    says where it came from.

    One transaction: lock the item (creating it when absent; an expired one counts as
    absent and is deleted first), check ``if_match``, write, keep the version, audit
    ``memory.put`` with the value before and after.

    Raises:
        InvalidInput: a bad namespace, key, value, text, tags, TTL or subject.
        TooLarge: the value is over 256 KiB.
        PreconditionFailed: ``if_match`` does not name the current version (no item: 412
            with version 0).
    """
    labels = namespace_labels(namespace)
    tags = [] if tags is None else tags
    now = timezone.now()
    _check_item(key, value, text, tags, ttl_seconds, expires_at, now)
    keep_subject = subject is None and not provenance.subject
    if subject is None:
        subject = provenance.subject
    if not isinstance(subject, str):
        raise InvalidInput("subject must be a string", field="subject")
    require_storable(subject, field="subject", max_length=200)
    if ttl_seconds is not None:
        expires_at = now + timedelta(seconds=ttl_seconds)
    path = namespace_path(labels)
    fields: dict[str, Any] = {
        "value": value,
        "text": search_text(value, text),
        "tags": tags,
        "expires_at": expires_at,
        "ttl_seconds": ttl_seconds,
        "subject": subject,
        "run_id": provenance.run_id,
        "step_id": provenance.step_id,
        "session_id": provenance.session_id,
        "source_message_id": provenance.source_message_id,
        "actor_kind": actor.kind,
        "actor_id": actor.id,
        "actor_name": actor.name,
        "updated_at": now,
    }
    put = _Put(project, path, labels, key, fields, if_match, keep_subject, actor, provenance, now)
    try:
        return put.write()
    except IntegrityError:
        # Another writer created the item after this one found none (the unique key refused
        # this INSERT once that writer committed, and this transaction rolled back): replace
        # theirs, under its lock this time.
        return put.write()


@dataclass(frozen=True)
class _Put:
    """One ``memory_put``, its input checked, that ``write`` makes (see ``memory_put``)."""

    project: Project
    path: str
    labels: tuple[str, ...]
    key: str
    fields: dict[str, Any]
    if_match: str | None
    keep_subject: bool
    actor: Actor
    provenance: Provenance
    now: datetime

    def write(self) -> Written:
        """The put's transaction: lock, check, write, keep the version, audit."""
        rows = item_rows()
        # A new item's id is chosen first: its audit chain's head is read with the lock.
        new_id = uuid.uuid4()
        with rows.transaction():
            item = _live_locked(
                self.project, self.path, self.key, self.now, new_chain=memory_chain(new_id)
            )
            if item is None and self.if_match is None:
                item = MemoryItem(
                    id=new_id,
                    project=self.project,
                    namespace_path=self.path,
                    depth=len(self.labels),
                    key=self.key,
                    created_at=self.now,
                    **self.fields,
                )
                rows.insert(item)
                self._record(item, before=None)
                return Written(item=item, created=True)
            _check_if_match(item, self.if_match)
            assert item is not None
            before = item.value
            changes = dict(self.fields)
            if self.keep_subject:
                changes["subject"] = item.subject
            for name, value in changes.items():
                setattr(item, name, value)
            item.version += 1
            rows.update(item)
            self._record(item, before=before)
            return Written(item=item, created=False)

    def _record(self, item: MemoryItem, *, before: dict[str, Any] | None) -> None:
        _record(
            actor=self.actor,
            item=item,
            operation=MemoryOperation.PUT,
            before=before,
            provenance=self.provenance,
            now=self.now,
        )


def memory_delete(
    *,
    actor: Actor,
    project: Project,
    namespace: Any,
    key: Any,
    reason: Any = "",
    if_match: str | None = None,
    provenance: Provenance = NONE,
) -> MemoryVersion | None:
    """Delete the item ``key`` in ``namespace`` of ``project`` (LangGraph's
    ``BaseStore.delete``), with ``reason`` (up to 2000 characters) kept in its history and
    audit event ``memory.delete`` (the value before, none after). Returns the version that
    records it, or None when there was no live item (a no-op, as LangGraph's; with
    ``if_match`` a 412 instead).

    Raises:
        InvalidInput: a bad namespace, key or reason.
        PreconditionFailed: ``if_match`` does not name the current version.
    """
    labels = namespace_labels(namespace)
    if not isinstance(key, str) or not key:
        raise InvalidInput("key must be a non-empty string", field="key")
    if not isinstance(reason, str):
        raise InvalidInput("reason must be a string", field="reason")
    require_storable(reason, field="reason", max_length=MAX_REASON_CHARS)
    now = timezone.now()
    with audited_atomic():
        item = _live_locked(project, namespace_path(labels), key, now)
        _check_if_match(item, if_match)
        if item is None:
            return None
        kept = _record(
            actor=actor,
            item=item,
            operation=MemoryOperation.DELETE,
            before=item.value,
            provenance=provenance,
            reason=reason,
            now=now,
        )
        item.delete()
    return kept


def memory_refresh_ttl(*, item_ids: list[Any]) -> int:
    """Renew the TTL of the live items ``item_ids`` that have one (LangGraph's
    ``refresh_ttl`` on reads): ``expires_at`` becomes now plus their ``ttl_seconds``. Not
    a write of the item (no version, no audit event). Returns how many were renewed."""
    now = timezone.now()
    renewed = 0
    with transaction.atomic():
        live = MemoryItem.objects.select_for_update().filter(
            pk__in=item_ids, ttl_seconds__isnull=False, expires_at__gt=now
        )
        for item in live.order_by("pk"):
            assert item.ttl_seconds is not None
            item.expires_at = now + timedelta(seconds=item.ttl_seconds)
            item.save(update_fields=["expires_at"])
            renewed += 1
    return renewed
