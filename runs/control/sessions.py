"""Sessions (issue 31, part 3): a user's conversation with an agent over many runs.

A session is created and closed here; its conversation grows by the messages its runs append
(``runs.control.conversation``) and by items added to it directly (the OpenAI Agents SDK's
``Session.add_items`` between runs). Nothing here destroys a message: ``pop`` and ``clear``
(the Agents SDK's ``pop_item`` and ``clear_session``) mark messages removed from the
session's active conversation, audited, and keep them; compaction replaces older messages in
its active context by a summary, as a run's (``runs.control.compaction``).

Every change locks the session row (``runs.transitions.lock_session``) and writes one audit
event in the session's chain (``session.<event>``) in the same transaction.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Final

from django.db import IntegrityError
from django.utils import timezone

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from agentops.grants import parse_grant
from agentops.storable import require_storable
from audit.services import audited_atomic
from projects.models import Project
from runs import wakeups
from runs.context_selectors import active_compactions, session_context
from runs.control.compaction import (
    Summary,
    check_range,
    client_summary,
    compacted_payload,
    compaction_create,
    context_over_threshold,
    load_summarizer,
    summarizer_summary,
)
from runs.models import AgentSession, Compaction, Message, Run, SessionStatus
from runs.models.conversation import estimate_tokens
from runs.store.writes import insert_new
from runs.transitions import lock_session, record_session_event, save_session

logger = logging.getLogger(__name__)

# The most items one request adds, and the longest external and subject ids (characters).
MAX_ITEMS: Final = 200
MAX_ID_CHARS: Final = 200


def _text(value: Any, field: str, *, required: bool) -> str:
    if not isinstance(value, str) or (required and not value.strip()):
        kind = "a non-empty string" if required else "a string"
        raise InvalidInput(f"{field} must be {kind}", field=field)
    require_storable(value, field=field, max_length=MAX_ID_CHARS)
    return value


def session_create(
    *,
    actor: Actor,
    project: Project,
    external_id: Any,
    subject: Any = "",
    metadata: Any = None,
    grant: Any = None,
) -> AgentSession:
    """Open a session in ``project`` (the caller has checked that the actor may add runs
    there). ``external_id`` is the client's own name for it (1-200 characters, unique in
    the project); ``subject`` the end user's subject id (0-200 characters); ``metadata`` a
    JSON object kept as is; ``grant`` the tools its runs may call (``agentops.grants``;
    None: no limit). One audit event, ``session.created``.

    Raises:
        InvalidInput: a malformed field.
        Conflict: the project has a session with this ``external_id`` already.
    """
    external_id = _text(external_id, "external_id", required=True)
    subject = _text(subject, "subject", required=False)
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise InvalidInput("metadata must be an object", field="metadata")
    require_storable(metadata, field="metadata")
    grant = parse_grant(grant)
    if AgentSession.objects.filter(project=project, external_id=external_id).exists():
        raise Conflict(f"the project has a session {external_id!r} already")
    try:
        with audited_atomic():
            session = AgentSession.objects.create(
                project=project,
                external_id=external_id,
                subject=subject,
                metadata=metadata,
                grant=grant,
                creator_kind=actor.kind,
                creator_id=actor.id,
                creator_name=actor.name,
            )
            record_session_event(
                actor, session, "created", from_state="", external_id=external_id, grant=grant
            )
    except IntegrityError as exc:
        # Two creators of one external id at once: the unique constraint chose one.
        raise Conflict(f"the project has a session {external_id!r} already") from exc
    return session


def session_close(*, actor: Actor, session_id: uuid.UUID | str) -> AgentSession:
    """Close the session: it takes no more runs, messages or state writes; what it holds is
    kept (for retention and erasure to delete). Closing a closed session changes nothing
    and answers it as it is (no event). One audit event, ``session.closed``.

    Raises:
        AgentSession.DoesNotExist: unknown session.
    """
    with audited_atomic():
        session = lock_session(session_id)
        if not session.is_open:
            return session
        session.status = SessionStatus.CLOSED
        session.closed_at = timezone.now()
        save_session(session)
        record_session_event(actor, session, "closed", from_state=SessionStatus.OPEN)
    return session


def parse_items(raw: Any) -> list[dict[str, Any]]:
    """Check conversation items added to a session: a list of 1 to ``MAX_ITEMS`` JSON
    objects, each an OpenAI chat message or Responses-API input item (``{"role": "user",
    "content": ...}``, ``{"type": "function_call", ...}``, ``{"type":
    "function_call_output", ...}``, reasoning items...), kept verbatim: the Agents SDK
    gives them back to its model as they were.

    Raises:
        InvalidInput: not such a list, or an item PostgreSQL cannot store.
    """
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_ITEMS:
        raise InvalidInput(f"items must be a list of 1 to {MAX_ITEMS} objects", field="items")
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not item:
            raise InvalidInput(f"items[{i}] must be a non-empty object", field=f"items[{i}]")
    require_storable(raw, field="items")
    return raw


def session_messages_locked(
    session: AgentSession, messages: list[Message], *, run: Run | None
) -> None:
    """Give unsaved ``messages`` (of ``run``, or added to the locked ``session`` directly:
    then their ``position`` is their session position) the session's next positions
    (``AgentSession.message_count`` onwards, read under its lock: O(1) whatever the
    conversation's length), and add their tokens to its active context (the caller inserts
    the messages and saves the session). Past ``AGENTOPS_CONTEXT_TOKEN_THRESHOLD`` tokens a
    ``compact_session`` wake-up goes to the workers after commit
    (``session_compact_over_threshold``)."""
    for offset, message in enumerate(messages):
        message.session = session
        message.session_position = session.message_count + offset
        if run is None:
            message.position = message.session_position
    session.message_count += len(messages)
    session.context_tokens += sum(message.tokens for message in messages)
    if context_over_threshold(session):
        # A lost or repeated wake-up is harmless: each append past the threshold sends one,
        # and the worker checks the threshold again under the session's lock.
        wakeups.compact_session_on_commit(session.pk)


def _open_session(session_id: uuid.UUID | str) -> AgentSession:
    session = lock_session(session_id)
    if not session.is_open:
        raise Conflict("the session is closed")
    return session


def session_items_add(*, actor: Actor, session_id: uuid.UUID | str, items: Any) -> list[Message]:
    """Append ``items`` (``parse_items``) to the session's conversation, outside any run, in
    one INSERT. One audit event, ``session.items_added``, with the count, the first new
    session position and their estimated tokens. An active context past
    ``AGENTOPS_CONTEXT_TOKEN_THRESHOLD`` tokens is compacted by a worker after commit
    (``session_messages_locked``); the client may also ask (``session_compact``).

    Raises:
        AgentSession.DoesNotExist: unknown session.
        InvalidInput: malformed items.
        Conflict: the session is closed.
    """
    checked = parse_items(items)
    with audited_atomic():
        session = _open_session(session_id)
        first = session.message_count
        added = [
            Message.from_openai(item, position=0, tokens=estimate_tokens(item)) for item in checked
        ]
        session_messages_locked(session, added, run=None)
        insert_new(added)
        save_session(session)
        record_session_event(
            actor,
            session,
            "items_added",
            items=len(added),
            first_position=first,
            tokens=sum(message.tokens for message in added),
        )
    return added


def session_item_pop(*, actor: Actor, session_id: uuid.UUID | str) -> dict[str, Any] | None:
    """Take the latest entry out of the session's active context and return it (the Agents
    SDK's ``pop_item``): a message, marked removed; or a compaction's summary (``{"role":
    "system", "content": summary}``), marked removed with the messages it stands for. None
    when the active context is empty. Nothing is deleted. One audit event,
    ``session.item_popped``, with the session position(s) taken out.

    Raises:
        AgentSession.DoesNotExist: unknown session.
        Conflict: the session is closed.
    """
    with audited_atomic():
        session = _open_session(session_id)
        entries = session_context(session_id=session.pk).entries
        if not entries:
            return None
        latest = entries[-1]
        now = timezone.now()
        Message.objects.filter(
            session=session,
            session_position__range=(latest.first, latest.last),
            removed_at__isnull=True,
        ).update(removed_at=now)
        if latest.compaction is not None:
            Compaction.objects.filter(pk=latest.compaction).update(removed_at=now)
        session.context_tokens = max(0, session.context_tokens - latest.tokens)
        save_session(session)
        record_session_event(
            actor,
            session,
            "item_popped",
            first=latest.first,
            last=latest.last,
            compaction=latest.compaction,
            tokens=latest.tokens,
        )
    return latest.message


def session_clear(*, actor: Actor, session_id: uuid.UUID | str) -> int:
    """Empty the session's active conversation (the Agents SDK's ``clear_session``): every
    message and compaction still in it is marked removed, none deleted; returns how many
    messages were. One audit event, ``session.cleared``, with that count.

    Raises:
        AgentSession.DoesNotExist: unknown session.
        Conflict: the session is closed.
    """
    with audited_atomic():
        session = _open_session(session_id)
        now = timezone.now()
        removed = Message.objects.filter(session=session, removed_at__isnull=True).update(
            removed_at=now
        )
        Compaction.objects.filter(session=session, removed_at__isnull=True).update(removed_at=now)
        tokens_before = session.context_tokens
        session.context_tokens = 0
        save_session(session)
        record_session_event(
            actor, session, "cleared", messages=removed, tokens_before=tokens_before
        )
    return removed


def session_compact(
    *,
    actor: Actor,
    session_id: uuid.UUID | str,
    summary: Any = None,
    first: Any = None,
    last: Any = None,
) -> Compaction:
    """Replace messages ``first``..``last`` (session positions, inclusive) in the session's
    active context by ``summary`` (the client's text, up to ``MAX_SUMMARY_CHARS``
    characters), or, without them, by what the server's summarizer (``AGENTOPS_SUMMARIZER``)
    answers for the active context: ``runs.control.compaction.run_compact``'s rules, on the
    session's conversation. Messages are kept. One audit event, ``session.compacted``.

    Raises:
        AgentSession.DoesNotExist: unknown session.
        InvalidInput: a summary without a valid range, or a range without a summary.
        Conflict: the session is closed; the summarizer found nothing to compact, or the
            context changed while it summarized.
    """
    given = client_summary(summary, first, last)
    if given is None:
        return _summarize(actor, session_id, trigger="request")
    return _compact(actor, session_id, given, trigger="request")


def session_compact_over_threshold(*, actor: Actor, session_id: uuid.UUID) -> Compaction | None:
    """Compact session ``session_id`` with the server's summarizer if its active context is
    still past ``AGENTOPS_CONTEXT_TOKEN_THRESHOLD`` tokens (the ``compact_session`` wake-up:
    sent again by every append past it, so a lost or repeated one is harmless). Returns the
    compaction, or None when there was nothing to do (unknown or closed session, under the
    threshold, nothing the summarizer would replace)."""
    session = AgentSession.objects.filter(pk=session_id).first()
    if session is None or not session.is_open or not context_over_threshold(session):
        return None
    try:
        return _summarize(actor, session_id, trigger="threshold")
    except Conflict as exc:
        logger.info("session %s not compacted: %s", session_id, exc)
        return None


def _summarize(actor: Actor, session_id: uuid.UUID | str, *, trigger: str) -> Compaction:
    """Compact the session's active context as the server's summarizer (``AGENTOPS_SUMMARIZER``)
    plans it.

    Raises:
        AgentSession.DoesNotExist: unknown session.
        Conflict: the session is closed, the summarizer found nothing to compact, or the
            context changed while it summarized.
    """
    summarizer = load_summarizer()
    found = AgentSession.objects.filter(pk=session_id).values_list("pk", flat=True).get()
    # Outside any transaction: the summarizer may take its time; its range is checked
    # again under the session's lock.
    planned = summarizer_summary(summarizer, session_context(session_id=found).entries)
    try:
        return _compact(actor, session_id, planned, trigger=trigger)
    except InvalidInput as exc:
        raise Conflict(f"the context changed while it was summarized: {exc.message}") from exc


def _compact(
    actor: Actor, session_id: uuid.UUID | str, summary: Summary, *, trigger: str
) -> Compaction:
    with audited_atomic():
        session = _open_session(session_id)
        active = active_compactions(
            Compaction.objects.filter(session=session, removed_at__isnull=True)
        )
        replaced = check_range(session.message_count, summary.first, summary.last, active)
        in_range = Message.objects.filter(
            session=session,
            session_position__range=(summary.first, summary.last),
            removed_at__isnull=True,
        )
        for made in replaced:
            in_range = in_range.exclude(session_position__range=(made.first, made.last))
        compaction = compaction_create(session, in_range, replaced, summary, actor, session=session)
        save_session(session)
        record_session_event(
            actor, session, "compacted", **compacted_payload(compaction, replaced, trigger)
        )
    return compaction
