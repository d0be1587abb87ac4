"""Turns reported at the same moment, and a compaction among them: the run's row lock orders
them, so positions stay unique and without gaps, each turn's messages stay together, and the
run's counters match its rows. Threads with their own PostgreSQL connections."""

from __future__ import annotations

import pytest

from agentops.actors import Actor
from runs.context_selectors import active_context
from runs.control.compaction import run_compact
from runs.control.conversation import run_messages_append
from runs.control.create import run_create
from runs.models import Message, Run
from testsupport.concurrency import run_together

pytestmark = pytest.mark.django_db(transaction=True)

TURNS = 4
PER_TURN = 3


def test_turns_at_once_get_whole_runs_of_positions(seeded, operator):
    actor = Actor.for_user(operator, via_api=True)
    run = run_create(actor=actor, agent="client", goal="many at once")
    run_messages_append(
        actor=actor, run_id=run.pk, messages=[{"role": "system", "content": "first"}] * 2
    )

    def turn(n: int) -> None:
        messages = [{"role": "user", "content": f"turn {n}"}] * PER_TURN
        run_messages_append(actor=actor, run_id=run.pk, messages=messages)

    calls = [lambda n=n: turn(n) for n in range(TURNS)]
    calls.append(lambda: run_compact(actor=actor, run_id=run.pk, summary="s", first=0, last=1))
    run_together(calls)

    rows = list(Message.objects.filter(run=run).order_by("position"))
    assert [m.position for m in rows] == list(range(2 + TURNS * PER_TURN))
    turns = [m.content for m in rows[2:]]
    for start in range(0, len(turns), PER_TURN):
        assert len(set(turns[start : start + PER_TURN])) == 1
    assert sorted(set(turns)) == [f"turn {n}" for n in range(TURNS)]
    stored = Run.objects.get(pk=run.pk)
    assert stored.message_count == len(rows)
    assert stored.context_tokens == active_context(run_id=run.pk).tokens
