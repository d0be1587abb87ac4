"""A session's context is compacted past the token threshold as a run's is (issue 31, item 5):
by a worker after the append that crossed it, with the server's summarizer, audited in the
session's chain; items added by a run in the session count too; the originals are kept."""

from __future__ import annotations

import pytest

from agentops.actors import Actor
from audit.models import AuditEvent, session_chain
from projects.models import Project
from runs.control.conversation import run_messages_append
from runs.control.create import run_create
from runs.control.sessions import (
    session_close,
    session_compact_over_threshold,
    session_create,
    session_items_add,
)
from runs.models import AgentSession, Compaction, Message
from runs.models.conversation import estimate_tokens

pytestmark = pytest.mark.django_db

ITEMS = [{"role": "user", "content": f"message number {i}"} for i in range(10)]
EACH = estimate_tokens(ITEMS[0])


@pytest.fixture
def actor(operator) -> Actor:
    return Actor.for_user(operator, via_api=True)


@pytest.fixture
def session(actor) -> AgentSession:
    """An open session holding the ten ``ITEMS`` (session positions 0 to 9)."""
    project = Project.objects.get(slug="default")
    made = session_create(actor=actor, project=project, external_id="chat-1")
    session_items_add(actor=actor, session_id=made.pk, items=ITEMS)
    return made


def test_past_the_threshold_an_items_append_compacts_the_session(
    session, actor, settings, django_capture_on_commit_callbacks
):
    settings.AGENTOPS_CONTEXT_TOKEN_THRESHOLD = 12 * EACH
    settings.AGENTOPS_CONTEXT_KEEP_LAST = 2
    more = {"role": "user", "content": "message number X"}
    with django_capture_on_commit_callbacks(execute=True):
        session_items_add(actor=actor, session_id=session.pk, items=[more, more])
    assert not Compaction.objects.filter(session=session).exists()  # 12 items: not past it
    with django_capture_on_commit_callbacks(execute=True):
        session_items_add(actor=actor, session_id=session.pk, items=[more])
    made = Compaction.objects.get(session=session)
    assert (made.first, made.last) == (1, 10)
    assert made.tokens_before == 13 * EACH
    assert AgentSession.objects.get(pk=session.pk).context_tokens == made.tokens_after
    assert made.tokens_after < 12 * EACH
    event = AuditEvent.objects.get(chain=session_chain(session.pk), verb="session.compacted")
    assert (event.payload["trigger"], event.actor_name) == ("threshold", "compaction")
    assert Message.objects.filter(session=session, removed_at__isnull=True).count() == 13


def test_a_runs_messages_in_the_session_count_toward_its_threshold(
    session, actor, settings, django_capture_on_commit_callbacks
):
    settings.AGENTOPS_CONTEXT_TOKEN_THRESHOLD = 11 * EACH
    settings.AGENTOPS_CONTEXT_KEEP_LAST = 2
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(actor=actor, agent="client", goal="talk", session=session)
    # The run's own context (one message) is far below the threshold; the session's is past.
    with django_capture_on_commit_callbacks(execute=True):
        run_messages_append(
            actor=actor, run_id=run.pk, messages=[{"role": "user", "content": "message number Y"}]
        )
        run_messages_append(
            actor=actor, run_id=run.pk, messages=[{"role": "user", "content": "message number Z"}]
        )
    assert not Compaction.objects.filter(run=run).exists()
    made = Compaction.objects.get(session=session)
    assert made.tokens_before == 12 * EACH


def test_under_the_threshold_or_closed_nothing_is_compacted(session, actor, settings):
    settings.AGENTOPS_CONTEXT_TOKEN_THRESHOLD = 10 * EACH
    assert session_compact_over_threshold(actor=actor, session_id=session.pk) is None
    settings.AGENTOPS_CONTEXT_TOKEN_THRESHOLD = 5 * EACH
    session_close(actor=actor, session_id=session.pk)
    assert session_compact_over_threshold(actor=actor, session_id=session.pk) is None
    settings.AGENTOPS_CONTEXT_TOKEN_THRESHOLD = 0
    assert not Compaction.objects.filter(session=session).exists()
