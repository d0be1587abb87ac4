"""Compaction: older messages of a run replaced in its active context by a summary, the
messages themselves kept (``runs.models.Compaction``; issue 31, part 5).

The summary comes from the client (``summary`` with the ``first`` and ``last`` positions it
stands for) or from the server's summarizer (``AGENTOPS_SUMMARIZER``, ``runs.summarizers``),
on request or once the run's active context passes ``AGENTOPS_CONTEXT_TOKEN_THRESHOLD``
tokens after an append (a ``compact_run`` wake-up sent after that append commits: the
summarizer, which may call a model, never runs inside a transaction).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import QuerySet, Sum
from django.utils.module_loading import import_string

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from audit.services import audited_atomic
from runs import wakeups
from runs.context_selectors import active_compactions, active_context, uncovered
from runs.models import AgentSession, Compaction, Message, Run
from runs.models.conversation import estimate_tokens
from runs.selectors import last_step_index
from runs.transitions import lock_run, record_event, save_run

logger = logging.getLogger(__name__)

# What ``Compaction.summarizer`` says of a summary the client wrote.
CLIENT = "client"
MAX_SUMMARY_CHARS = 200_000


def context_over_threshold(owner: Run | AgentSession) -> bool:
    """Whether the active context of ``owner``, a run or a session (its ``context_tokens``),
    is past ``AGENTOPS_CONTEXT_TOKEN_THRESHOLD`` tokens (0: never)."""
    threshold: int = settings.AGENTOPS_CONTEXT_TOKEN_THRESHOLD
    return threshold > 0 and owner.context_tokens > threshold


def compacted_payload(
    compaction: Compaction, replaced: list[Compaction], trigger: str
) -> dict[str, Any]:
    """The payload of the ``compacted`` audit event of ``compaction`` (a run's or a
    session's): its id, range, tokens before and after and summarizer, the ``trigger``
    (``request`` or ``threshold``) and the ids of the compactions it ``replaced``."""
    return {
        "compaction": compaction.pk,
        "first": compaction.first,
        "last": compaction.last,
        "tokens_before": compaction.tokens_before,
        "tokens_after": compaction.tokens_after,
        "summarizer": compaction.summarizer,
        "summarizer_version": compaction.summarizer_version,
        "trigger": trigger,
        "replaced": [made.pk for made in replaced],
    }


def compaction_create(
    owner: Run | AgentSession,
    covered: QuerySet[Message],
    replaced: list[Compaction],
    summary: Summary,
    actor: Actor,
    **fields: Any,
) -> Compaction:
    """The compaction row of a locked run's or session's (``owner``'s) messages by
    ``summary`` (``fields`` name the owner: ``run=`` with ``step_index=``, or ``session=``),
    and the owner's active context after it, in tokens (``owner.context_tokens``; the caller
    saves the owner). The context loses the ``covered`` messages (those of the range no
    earlier compaction already stands for) and the summaries of the compactions it
    ``replaced``, and gains the summary (``estimate_tokens``)."""
    before = owner.context_tokens
    message_tokens = covered.aggregate(total=Sum("tokens"))["total"] or 0
    removed = message_tokens + sum(made.summary_tokens for made in replaced)
    summary_tokens = estimate_tokens({"content": summary.text})
    owner.context_tokens = max(0, before - removed + summary_tokens)
    return Compaction.objects.create(
        first=summary.first,
        last=summary.last,
        summary=summary.text,
        summary_tokens=summary_tokens,
        tokens_before=before,
        tokens_after=owner.context_tokens,
        summarizer=summary.summarizer,
        summarizer_version=summary.version,
        actor=actor.name,
        **fields,
    )


def compact_run_on_commit(run_id: uuid.UUID) -> None:
    """Have a worker compact run ``run_id`` (``run_compact_over_threshold``) once the
    transaction commits."""
    wakeups.compact_run_on_commit(run_id)


def load_summarizer() -> Any:
    """The server's summarizer: the callable ``AGENTOPS_SUMMARIZER`` names by dotted path
    (``runs.summarizers``); checked at start-up too (``RunsConfig.ready``).

    Raises:
        ImproperlyConfigured: the path names nothing importable, or nothing callable.
    """
    path: str = settings.AGENTOPS_SUMMARIZER
    try:
        summarizer = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(f"AGENTOPS_SUMMARIZER {path!r}: {exc}") from exc
    if not callable(summarizer):
        raise ImproperlyConfigured(f"AGENTOPS_SUMMARIZER {path!r} is not callable")
    return summarizer


def check_position(value: Any, field: str) -> int:
    """``value`` as a message position.

    Raises:
        InvalidInput: not an integer from 0.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"{field} must be a message position (an integer from 0)", field=field)
    return value


@dataclass(frozen=True)
class Summary:
    """A compaction's summary: ``text`` standing for the messages ``first``..``last``
    (positions, inclusive), written by ``summarizer`` (``CLIENT``, or the server's summarizer's
    dotted path) at its ``version``."""

    text: str
    first: int
    last: int
    summarizer: str = CLIENT
    version: str = ""


def summarizer_summary(summarizer: Any, entries: list[Any]) -> Summary:
    """What the server's ``summarizer`` (``load_summarizer``) plans for an active context of
    ``entries``.

    Raises:
        Conflict: it found nothing to compact.
    """
    planned = summarizer(entries)
    if planned is None:
        raise Conflict("the summarizer found nothing to compact in the active context")
    return Summary(
        str(planned.text),
        planned.first,
        planned.last,
        settings.AGENTOPS_SUMMARIZER,
        str(getattr(summarizer, "version", "")),
    )


def client_summary(summary: Any, first: Any, last: Any) -> Summary | None:
    """A compaction request's client summary and range (``summary``, ``first``, ``last`` as
    sent), checked: None when it sends none of them (the server's summarizer then chooses the
    range).

    Raises:
        InvalidInput: a range without a summary, a summary that is not a text of 1 to
            ``MAX_SUMMARY_CHARS`` characters, or a position that is not a whole number >= 0.
    """
    if summary is None:
        if first is not None or last is not None:
            raise InvalidInput(
                "first and last come with a summary; without one the server's summarizer "
                "chooses the range",
                field="summary",
            )
        return None
    if not isinstance(summary, str) or not summary.strip() or len(summary) > MAX_SUMMARY_CHARS:
        raise InvalidInput(
            f"summary must be a text of 1 to {MAX_SUMMARY_CHARS} characters", field="summary"
        )
    return Summary(summary, check_position(first, "first"), check_position(last, "last"))


def check_range(count: int, first: int, last: int, active: list[Compaction]) -> list[Compaction]:
    """The active compactions the range ``first``..``last`` of a conversation of ``count``
    messages replaces (those it holds whole).

    Raises:
        InvalidInput: the range is empty, past the last message, or cuts an active compaction.
    """
    if not first <= last < count:
        raise InvalidInput(
            f"first and last must be positions with first <= last < {count} (the messages)",
            field="last",
        )
    replaced = []
    for made in active:
        if first <= made.first and made.last <= last:
            replaced.append(made)
        elif not (made.last < first or last < made.first):
            raise InvalidInput(
                f"positions {first} to {last} cut the compaction of {made.first} to "
                f"{made.last}: cover it whole or leave it out",
                field="first",
            )
    return replaced


def _record_locked(run: Run, actor: Actor, summary: Summary, *, trigger: str) -> Compaction:
    active = active_compactions(Compaction.objects.filter(run_id=run.pk))
    replaced = check_range(run.message_count, summary.first, summary.last, active)
    in_range = Message.objects.filter(
        run_id=run.pk, position__range=(summary.first, summary.last)
    ).filter(uncovered(replaced))
    compaction = compaction_create(
        run, in_range, replaced, summary, actor, run=run, step_index=last_step_index(run.pk)
    )
    save_run(run)
    record_event(actor, run, "compacted", **compacted_payload(compaction, replaced, trigger))
    return compaction


def run_compact(
    *,
    actor: Actor,
    run_id: uuid.UUID,
    summary: Any = None,
    first: Any = None,
    last: Any = None,
    trigger: str = "request",
) -> Compaction:
    """Replace messages ``first``..``last`` (positions, inclusive) of run ``run_id`` in its
    active context by ``summary`` (the client's text, up to ``MAX_SUMMARY_CHARS``
    characters), or, without ``summary`` (and without a range), by what the server's
    summarizer (``AGENTOPS_SUMMARIZER``) answers for the active context. The range must hold
    whole any earlier compaction it touches (which it then replaces). The run's
    ``context_tokens`` drop to the new size; the ``run.compacted`` audit event (same
    transaction) has the range, tokens before and after, summarizer and version, and
    ``trigger`` (``request``, or ``threshold`` for an automatic one).

    Raises:
        Run.DoesNotExist: unknown run.
        InvalidInput: a summary without a valid range (see ``check_range``), or a range
            without a summary.
        Conflict: the run is finished; the summarizer found nothing to compact, or the
            context changed while it summarized.
    """
    given = client_summary(summary, first, last)
    if given is None:
        return _compact_by_summarizer(actor=actor, run_id=run_id, trigger=trigger)
    with audited_atomic():
        run = lock_run(run_id)
        if run.is_terminal:
            raise Conflict(f"run is {run.status}: its context is no longer compacted")
        return _record_locked(run, actor, given, trigger=trigger)


def _compact_by_summarizer(*, actor: Actor, run_id: uuid.UUID, trigger: str) -> Compaction:
    summarizer = load_summarizer()
    Run.objects.filter(pk=run_id).values_list("pk").get()
    # Outside any transaction: the summarizer may take its time. What it planned is checked
    # again under the run's lock, against the context as it is then.
    planned = summarizer_summary(summarizer, active_context(run_id=run_id).entries)
    with audited_atomic():
        run = lock_run(run_id)
        if run.is_terminal:
            raise Conflict(f"run is {run.status}: its context is no longer compacted")
        try:
            return _record_locked(run, actor, planned, trigger=trigger)
        except InvalidInput as exc:
            raise Conflict(f"the context changed while it was summarized: {exc.message}") from exc


def run_compact_over_threshold(*, actor: Actor, run_id: uuid.UUID) -> Compaction | None:
    """Compact run ``run_id`` with the server's summarizer if its active context is still past
    ``AGENTOPS_CONTEXT_TOKEN_THRESHOLD`` tokens (the ``compact_run`` wake-up: sent again by
    every append past it, so a lost or repeated one is harmless). Returns the compaction, or
    None when there was nothing to do (unknown or finished run, under the threshold, nothing
    the summarizer would replace)."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None or run.is_terminal or not context_over_threshold(run):
        return None
    try:
        return run_compact(actor=actor, run_id=run_id, trigger="threshold")
    except Conflict as exc:
        logger.info("run %s not compacted: %s", run_id, exc)
        return None
