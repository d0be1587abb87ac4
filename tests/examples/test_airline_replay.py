"""The τ-bench airline conversations replayed through the OpenAI Agents SDK, the Python SDK,
agentops (a real web server and worker) and the live airline tools on PostgreSQL, with every
write approved over the API by a second user."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from pathlib import Path

import pytest

from examples.airline.replay import replay
from examples.airline.store import Store
from runs.models import Run, Step, ToolCall
from testsupport.factories import make_token, make_user

pytestmark = [pytest.mark.long, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

DATA = Path(__file__).resolve().parents[3] / "shared/data/tau-bench-airline"
TRAJECTORIES = DATA / "trajectories.json"
AIRLINE_DSN = os.environ.get(
    "AIRLINE_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/agentops_airline_test"
)
WRITES = {
    "book_reservation",
    "cancel_reservation",
    "send_certificate",
    "update_reservation_baggages",
    "update_reservation_flights",
    "update_reservation_passengers",
}


def test_all_conversations_replay_exactly_with_every_write_once(worker, asgi_server, seeded):
    client = make_user("airline-agent", "operator")
    reviewer = make_user("airline-reviewer", "reviewer")
    tokens = [make_token(user) for user in (client, reviewer)]
    report = asyncio.run(
        replay(
            TRAJECTORIES,
            url=asgi_server.url,
            token=tokens[0],
            reviewer_token=tokens[1],
            dsn=AIRLINE_DSN,
            data_dir=DATA,
            concurrency=8,
        )
    )
    print(report.summary())
    assert [m for c in report.conversations for m in c.mismatches] == []
    assert len(report.conversations) == 100
    assert {c.status for c in report.conversations} == {"succeeded"}
    assert report.calls == 572

    runs = Run.objects.filter(metadata__source="tau-bench-airline")
    assert runs.count() == 100
    assert {(r.metadata["task_id"], r.metadata["trial"]) for r in runs} == {
        (c.task_id, c.trial) for c in report.conversations
    }
    # Each model turn was recorded once: every tool call the model made appears once in its
    # run's conversation, as many as the run has steps.
    for run in runs:
        calls = Counter(
            call["id"]
            for message in run.messages.filter(role="assistant")
            for call in message.tool_calls or []
        )
        assert set(calls.values()) <= {1}, run.metadata
        assert sum(calls.values()) == run.steps.count(), run.metadata
    steps = Step.objects.filter(run__in=runs)
    # The tools' refusals ("Error: ...", 33 in the recorded outputs) are reported as tool
    # errors: those steps, and only those, are marked; they succeeded and the runs went on.
    marked = steps.filter(tool_error=True)
    assert marked.count() == 33
    assert all(s.result.startswith("Error:") for s in marked)
    assert not any(
        isinstance(s.result, str) and s.result.startswith("Error:")
        for s in steps.filter(tool_error=False)
    )
    # Every write waited for and got the second user's approval, and ran exactly once: one
    # ledger entry in agentops, one effect in the airline database, under the same key.
    writes = steps.filter(tool__in=WRITES)
    approved = writes.filter(
        approval__decisions__reviewer=reviewer, approval__decisions__decision="approve"
    )
    assert writes.count() == approved.count() == 121
    keys = Counter(
        ToolCall.objects.filter(step__in=writes).values_list("idempotency_key", flat=True)
    )
    assert set(keys.values()) == {1}
    assert set(keys) == set(writes.values_list("idempotency_key", flat=True))
    store = Store(AIRLINE_DSN, DATA)
    try:
        session = runs.first().metadata["session"]
        effects = Counter()
        for c in report.conversations:
            for key, _tool, _output in store.effects(f"{session}:{c.task_id}:{c.trial}"):
                effects[key] += 1
    finally:
        store.close()
    assert effects == keys
