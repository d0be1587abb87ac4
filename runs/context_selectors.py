"""Reads of the active context of runs and sessions: the messages and compaction summaries an
agent is given (``active_context``, ``session_context``), shared by the API, the compaction
services and the sessions' pages."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from runs.models import AgentSession, Compaction, Message


@dataclass(frozen=True, slots=True)
class ContextEntry:
    """One entry of a run's active context: a message (``first`` = ``last`` = its position)
    or a compaction's summary standing for messages ``first``..``last``; ``message`` in
    OpenAI chat format (a summary is ``{"role": "system", "content": summary}``), ``tokens``
    its estimated size (tokens) and ``compaction`` the compaction's id (None: a message)."""

    first: int
    last: int
    message: dict[str, Any]
    tokens: int
    compaction: int | None = None


@dataclass(frozen=True, slots=True)
class ActiveContext:
    """What a run's model sees now: ``entries`` in position order, their ``tokens`` in all
    (tokens) and the active ``compactions`` (oldest first)."""

    entries: list[ContextEntry]
    tokens: int
    compactions: list[Compaction]


def active_compactions(compactions: Iterable[Compaction]) -> list[Compaction]:
    """The compactions among ``compactions`` (one run's) no later one covers: a later
    compaction whose range holds an earlier one's replaces it (``runs.control.compaction``
    never lets two ranges overlap otherwise). In position order."""
    made = sorted(compactions, key=lambda c: c.pk)
    active = [
        c
        for i, c in enumerate(made)
        if not any(later.first <= c.first and c.last <= later.last for later in made[i + 1 :])
    ]
    return sorted(active, key=lambda c: c.first)


def uncovered(compactions: Iterable[Compaction]) -> Q:
    """The condition "a message is not replaced by one of ``compactions``" on ``Message``."""
    condition = Q()
    for c in compactions:
        condition &= ~Q(position__range=(c.first, c.last))
    return condition


def active_context(*, run_id: uuid.UUID | str) -> ActiveContext:
    """Run ``run_id``'s active context: its messages that no active compaction replaced and,
    in their place, the compactions' summaries; two queries (compactions, messages).

    A run with many messages and no compaction reads them all: the context is what its model
    is sent, and compaction is what keeps it short.
    """
    compactions = active_compactions(Compaction.objects.filter(run_id=run_id))
    messages = Message.objects.filter(run_id=run_id).filter(uncovered(compactions))
    entries = [
        ContextEntry(m.position, m.position, m.as_openai(), m.tokens)
        for m in messages.order_by("position")
    ]
    entries += [
        ContextEntry(
            c.first, c.last, {"role": "system", "content": c.summary}, c.summary_tokens, c.pk
        )
        for c in compactions
    ]
    entries.sort(key=lambda entry: entry.first)
    return ActiveContext(entries, sum(entry.tokens for entry in entries), compactions)


def session_messages_last(*, session_id: uuid.UUID, last: int) -> list[Message]:
    """The last ``last`` messages of session ``session_id`` (removed ones too: they are
    marked), oldest first: one read of the (session, session position) index, as
    ``messages_before`` reads a run's (a session's positions have no gaps either)."""
    count = AgentSession.objects.filter(pk=session_id).values_list("message_count", flat=True).get()
    window = Message.objects.filter(
        session_id=session_id, session_position__gte=max(0, count - last)
    )
    return list(window.order_by("session_position"))


def session_context(*, session_id: uuid.UUID) -> ActiveContext:
    """Session ``session_id``'s active context: its messages neither removed (``pop``,
    ``clear``) nor replaced by an active compaction of the session, and the compactions'
    summaries in their place, in session position order (entries' ``first`` and ``last`` are
    session positions); two queries. A run's own compactions do not change it."""
    compactions = active_compactions(
        Compaction.objects.filter(session_id=session_id, removed_at__isnull=True)
    )
    covered = Q()
    for c in compactions:
        covered |= Q(session_position__range=(c.first, c.last))
    messages = Message.objects.filter(session_id=session_id, removed_at__isnull=True)
    if compactions:
        messages = messages.exclude(covered)
    entries = [
        ContextEntry(m.session_position, m.session_position, m.as_openai(), m.tokens)
        for m in messages.order_by("session_position")
        if m.session_position is not None
    ]
    entries += [
        ContextEntry(
            c.first, c.last, {"role": "system", "content": c.summary}, c.summary_tokens, c.pk
        )
        for c in compactions
    ]
    entries.sort(key=lambda entry: entry.first)
    return ActiveContext(entries, sum(entry.tokens for entry in entries), compactions)
