"""Runs stored with their conversation as one JSON list keep every message: migration 0024
moves each list into ``Message`` rows (the same messages back, in order, tokens counted) and
going back rebuilds the lists."""

from __future__ import annotations

import uuid

from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from runs.models import Message, Run
from runs.models.conversation import estimate_tokens
from runs.selectors import run_conversation
from testsupport.migration_history import migrate_to_before, migrate_to_latest

BEFORE = [("runs", "0022_state_versions")]
CONVERSATION = [
    {"role": "system", "content": "You are an airline agent."},
    {"role": "user", "content": "cancel ABC", "position": 1},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "cancel"}}],
    },
    {"role": "tool", "tool_call_id": "c1", "name": "cancel", "content": '{"ok": true}'},
]


def test_stored_conversations_become_rows_and_come_back(empty_database):
    old = migrate_to_before(BEFORE)
    talked, silent = uuid.uuid4(), uuid.uuid4()
    old_run = old.get_model("runs", "Run")
    old_run.objects.create(id=talked, goal="talked", agent="client", conversation=CONVERSATION)
    old_run.objects.create(id=silent, goal="silent", agent="plan", conversation=[])

    migrate_to_latest()

    assert run_conversation(run_id=talked) == CONVERSATION
    assert list(Message.objects.filter(run_id=talked).values_list("position", flat=True)) == [
        0,
        1,
        2,
        3,
    ]
    run = Run.objects.get(pk=talked)
    assert run.message_count == 4
    assert run.context_tokens == sum(estimate_tokens(m) for m in CONVERSATION)
    assert Run.objects.get(pk=silent).message_count == 0
    assert not Message.objects.filter(run_id=silent).exists()

    # Back as ``manage.py migrate runs 0022`` takes it: 0025 gives the column back, 0024 fills it.
    back = MigrationExecutor(connection).migrate(BEFORE).apps
    assert back.get_model("runs", "Run").objects.get(pk=talked).conversation == CONVERSATION
