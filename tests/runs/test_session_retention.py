"""Retention of sessions: a session closed longer than ``AGENTOPS_SESSION_RETENTION_DAYS`` is
deleted with its own items, compactions, state and audit chain; its runs and their messages
stay (they follow the run policies); open and recently closed sessions stay."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agentops.actors import Actor
from audit.models import AuditEvent, session_chain
from projects.services import project_default
from runs.control.conversation import run_messages_append
from runs.control.create import run_create
from runs.control.sessions import session_close, session_create, session_items_add
from runs.control.state import session_state_write
from runs.models import AgentSession, Message, Run, StateVersion
from runs.retention import retention_purge

pytestmark = pytest.mark.django_db


def a_session(actor: Actor, name: str, capture) -> tuple[AgentSession, Run]:
    session = session_create(actor=actor, project=project_default(), external_id=name)
    session_items_add(actor=actor, session_id=session.pk, items=[{"role": "user", "content": "hi"}])
    session_state_write(
        session_id=session.pk, actor=actor, base_version=0, operation="put", document={"a": 1}
    )
    with capture(execute=True):
        run = run_create(actor=actor, agent="client", goal="g", session=session)
    run_messages_append(
        actor=actor, run_id=run.pk, messages=[{"role": "assistant", "content": "hello"}]
    )
    return session, run


def test_a_long_closed_session_is_deleted_and_its_runs_stay(
    operator, settings, django_capture_on_commit_callbacks
):
    settings.AGENTOPS_SESSION_RETENTION_DAYS = 30
    actor = Actor.for_user(operator)
    old, old_run = a_session(actor, "old", django_capture_on_commit_callbacks)
    recent, _ = a_session(actor, "recent", django_capture_on_commit_callbacks)
    a_session(actor, "open", django_capture_on_commit_callbacks)
    session_close(actor=actor, session_id=old.pk)
    session_close(actor=actor, session_id=recent.pk)
    AgentSession.objects.filter(pk=old.pk).update(closed_at=timezone.now() - timedelta(days=31))
    preview = retention_purge(actor=Actor.system("retention"), dry_run=True)
    assert preview["sessions"] == 1
    assert AgentSession.objects.filter(pk=old.pk).exists()

    report = retention_purge(actor=Actor.system("retention"))
    assert report["sessions"] == 1
    assert set(AgentSession.objects.values_list("external_id", flat=True)) == {"recent", "open"}
    assert not StateVersion.objects.filter(session_id=old.pk).exists()
    assert not AuditEvent.objects.filter(chain=session_chain(old.pk)).exists()
    kept = Run.objects.get(pk=old_run.pk)
    assert kept.session_id is None
    message = Message.objects.get(run=kept)
    assert (message.session_id, message.content) == (None, "hello")


def test_zero_days_keeps_every_session(operator, settings, django_capture_on_commit_callbacks):
    settings.AGENTOPS_SESSION_RETENTION_DAYS = 0
    actor = Actor.for_user(operator)
    session, _ = a_session(actor, "old", django_capture_on_commit_callbacks)
    session_close(actor=actor, session_id=session.pk)
    AgentSession.objects.filter(pk=session.pk).update(
        closed_at=timezone.now() - timedelta(days=3650)
    )
    assert retention_purge(actor=Actor.system("retention"))["sessions"] == 0
    assert AgentSession.objects.filter(pk=session.pk).exists()
