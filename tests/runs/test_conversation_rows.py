"""A run's conversation as rows: each appended message a ``Message`` at the next position, an
append one INSERT whatever the conversation's length, the last N one indexed query, every
chat-format message given back as it came (``runs.control.conversation``)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agentops.actors import Actor
from runs.control.conversation import run_messages_append
from runs.control.create import run_create, step_append
from runs.control.lifecycle import run_cancel
from runs.models import Message, RetentionPolicy, Run
from runs.models.conversation import estimate_tokens
from runs.retention import retention_purge
from runs.selectors import messages_before, run_conversation

pytestmark = pytest.mark.django_db


@pytest.fixture
def actor(operator) -> Actor:
    return Actor.for_user(operator, via_api=True)


def said(text: str) -> dict:
    return {"role": "user", "content": text}


def test_messages_get_the_next_positions_in_order(client_run, actor):
    run_messages_append(actor=actor, run_id=client_run.pk, messages=[said("a"), said("b")])
    run_messages_append(actor=actor, run_id=client_run.pk, messages=[said("c")])
    rows = list(Message.objects.filter(run=client_run).values_list("position", "content"))
    assert rows == [(0, "a"), (1, "b"), (2, "c")]
    run = Run.objects.get(pk=client_run.pk)
    assert run.message_count == 3
    assert run.context_tokens == 3 * estimate_tokens(said("a"))


def test_a_message_knows_the_step_it_came_after(client_run, actor):
    run_messages_append(actor=actor, run_id=client_run.pk, messages=[said("before any step")])
    step_append(actor=actor, run_id=client_run.pk, tool="calculate", args={"expression": "1+1"})
    run_messages_append(actor=actor, run_id=client_run.pk, messages=[said("after step 0")])
    rows = Message.objects.filter(run=client_run).values_list("content", "step_index")
    assert list(rows) == [("before any step", None), ("after step 0", 0)]


def test_every_chat_format_message_comes_back_unchanged(client_run, actor):
    sent = [
        {"role": "system", "content": "be brief", "name": ""},
        {"role": "user", "content": [{"type": "text", "text": "hi"}], "name": "ann"},
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": ""},
        {"role": "assistant", "content": "done", "tool_calls": []},
        {"role": "developer"},
    ]
    run_messages_append(actor=actor, run_id=client_run.pk, messages=sent)
    assert run_conversation(run_id=client_run.pk) == sent


def test_a_transcript_runs_conversation_is_rows_with_its_recorded_positions(actor):
    transcript = [
        {"role": "user", "content": "cancel ABC"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "cancel", "arguments": '{"id": "ABC"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "name": "cancel", "content": "ok"},
        {"role": "assistant", "content": "Cancelled."},
    ]
    run = run_create(actor=actor, agent="transcript", goal="replay", transcript=transcript)
    assert run_conversation(run_id=run.pk) == [
        {"role": "user", "content": "cancel ABC", "position": 0},
        {"role": "assistant", "content": "Cancelled.", "position": 3},
    ]
    assert Run.objects.get(pk=run.pk).message_count == 2


def _append_queries(run_id, actor) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        run_messages_append(actor=actor, run_id=run_id, messages=[said("one more")])
    return [q["sql"] for q in queries.captured_queries]


def test_an_append_costs_the_same_statements_early_and_after_a_thousand_messages(client_run, actor):
    run_messages_append(actor=actor, run_id=client_run.pk, messages=[said("first")])
    early = _append_queries(client_run.pk, actor)
    for _ in range(5):
        run_messages_append(actor=actor, run_id=client_run.pk, messages=[said("x" * 100)] * 200)
    late = _append_queries(client_run.pk, actor)
    assert len(late) == len(early)
    # One INSERT of the new message, and no statement reads or rewrites the others.
    inserts = [sql for sql in late if sql.startswith('INSERT INTO "runs_message"')]
    assert len(inserts) == 1
    assert not any("runs_message" in sql for sql in late if sql not in inserts)
    assert Run.objects.get(pk=client_run.pk).message_count == 1003


def test_the_last_n_messages_are_one_query(client_run, actor, django_assert_num_queries):
    run_messages_append(
        actor=actor, run_id=client_run.pk, messages=[said(str(i)) for i in range(120)]
    )
    with django_assert_num_queries(1) as queries:
        last = messages_before(run_id=client_run.pk, end=120, last=50)
    assert [m.content for m in last] == [str(i) for i in range(70, 120)]
    # The range of positions, read from the (run, position) index.
    assert '"runs_message"."position" >= 70' in queries.captured_queries[0]["sql"]
    assert [m.content for m in messages_before(run_id=client_run.pk, end=70, last=3)] == [
        "67",
        "68",
        "69",
    ]


def test_retention_deletes_and_redacts_conversations(actor):
    def finished_run(goal: str) -> Run:
        run = run_create(actor=actor, agent="client", goal=goal)
        run_messages_append(actor=actor, run_id=run.pk, messages=[said(goal)])
        run_cancel(run_id=run.pk, actor=actor)
        return run

    later = timezone.now() + timedelta(seconds=1)
    kept = run_create(actor=actor, agent="client", goal="keep")
    run_messages_append(actor=actor, run_id=kept.pk, messages=[said("kept")])
    deleted = finished_run("delete me")
    policy = RetentionPolicy.objects.create(name="gone", ttl_days=0)
    retention_purge(actor=Actor.system("retention"), now=later, policy_id=policy.pk)
    redacted = finished_run("redact me")
    policy = RetentionPolicy.objects.create(name="blank", ttl_days=0, action="redact")
    later = timezone.now() + timedelta(seconds=1)
    retention_purge(actor=Actor.system("retention"), now=later, policy_id=policy.pk)

    assert not Run.objects.filter(pk=deleted.pk).exists()
    assert not Message.objects.filter(run_id__in=[deleted.pk, redacted.pk]).exists()
    assert Run.objects.get(pk=redacted.pk).message_count == 0
    assert run_conversation(run_id=kept.pk) == [said("kept")]


def test_the_run_page_shows_the_latest_messages_of_a_long_conversation(
    client_run, actor, client, operator
):
    run_messages_append(
        actor=actor, run_id=client_run.pk, messages=[said(f"line {i}.") for i in range(150)]
    )
    client.force_login(operator)
    response = client.get(f"/runs/{client_run.pk}/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "The last 100 of 150 messages." in html
    assert "line 149." in html
    assert "line 50." in html
    assert "line 49." not in html
