"""Items added to a session directly and turns of two of its runs, all at the same moment: the
session's row lock orders them (each run's lock taken first, then the session's), so session
positions stay unique and without gaps, each request's items stay together, each run keeps
its own positions, and the session's counters match its rows. Threads with their own
PostgreSQL connections."""

from __future__ import annotations

import pytest

from agentops.actors import Actor
from projects.services import project_default
from runs.context_selectors import session_context
from runs.control.conversation import run_messages_append
from runs.control.create import run_create
from runs.control.sessions import session_create, session_items_add
from runs.models import AgentSession, Message
from testsupport.concurrency import run_together

pytestmark = pytest.mark.django_db(transaction=True)

PER_REQUEST = 3


def test_runs_and_direct_items_at_once_get_whole_runs_of_session_positions(seeded, operator):
    actor = Actor.for_user(operator, via_api=True)
    session = session_create(actor=actor, project=project_default(), external_id="busy")
    runs = [
        run_create(actor=actor, agent="client", goal=f"run {n}", session=session) for n in range(2)
    ]

    def run_turn(n: int, k: int) -> None:
        messages = [{"role": "assistant", "content": f"run {n} turn {k}"}] * PER_REQUEST
        run_messages_append(actor=actor, run_id=runs[n].pk, messages=messages)

    def direct(k: int) -> None:
        items = [{"type": "message_item", "content": f"direct {k}"}] * PER_REQUEST
        session_items_add(actor=actor, session_id=session.pk, items=items)

    calls = [lambda n=n, k=k: run_turn(n, k) for n in range(2) for k in range(2)]
    calls += [lambda k=k: direct(k) for k in range(2)]
    run_together(calls)

    rows = list(Message.objects.filter(session=session).order_by("session_position"))
    assert [m.session_position for m in rows] == list(range(6 * PER_REQUEST))
    contents = [m.content for m in rows]
    for start in range(0, len(contents), PER_REQUEST):
        assert len(set(contents[start : start + PER_REQUEST])) == 1
    for run in runs:
        positions = Message.objects.filter(run=run).order_by("position")
        assert list(positions.values_list("position", flat=True)) == list(range(2 * PER_REQUEST))
    stored = AgentSession.objects.get(pk=session.pk)
    assert stored.message_count == len(rows)
    assert stored.context_tokens == session_context(session_id=session.pk).tokens
