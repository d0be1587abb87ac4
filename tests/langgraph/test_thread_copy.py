"""A LangGraph thread's copy (``runs.control.thread_retention.thread_copy``, the saver's
``copy_thread``): the target gets every checkpoint, channel value and pending write of the
source, each with all its columns but its key, its session and a checkpoint's creation time,
and the source keeps its own."""

from __future__ import annotations

from typing import Any

import pytest
from django.db.models import Model

from agentops.actors import Actor
from projects.services import project_default
from runs.control.thread_retention import thread_copy
from runs.control.threads import (
    Blob,
    PendingWrite,
    Serialized,
    checkpoint_put,
    checkpoint_writes_put,
)
from runs.models import AgentSession, ThreadBlob, ThreadCheckpoint, ThreadWrite

pytestmark = pytest.mark.django_db

# The columns a copy gives values of its own (the test's list, not the code's).
OWN = {"id", "session", "created_at"}


def _rows(model: type[Model], thread_id: str) -> list[dict[str, Any]]:
    """Every row of ``model`` of thread ``thread_id``, as its columns but ``OWN``, sorted."""
    names = [f.attname for f in model._meta.concrete_fields if f.name not in OWN]
    session = AgentSession.objects.get(external_id=thread_id)
    found = model._default_manager.filter(session=session).values(*names)
    return sorted(
        (
            {k: bytes(v) if isinstance(v, memoryview) else v for k, v in row.items()}
            for row in found
        ),
        key=repr,
    )


def _save(actor: Actor, project_id: int, checkpoint_ns: str, checkpoint_id: str) -> None:
    checkpoint_put(
        actor=actor,
        project_id=project_id,
        thread_id="source",
        checkpoint_ns=checkpoint_ns,
        checkpoint_id=checkpoint_id,
        parent_checkpoint_id="1" if checkpoint_id == "2" else "",
        checkpoint=Serialized("msgpack", f"{checkpoint_ns}/{checkpoint_id}".encode()),
        channel_versions={"messages": checkpoint_id},
        metadata={"source": "loop", "step": int(checkpoint_id)},
        blobs=[Blob("messages", checkpoint_id, Serialized("json", checkpoint_id.encode()))],
    )
    checkpoint_writes_put(
        actor=actor,
        project_id=project_id,
        thread_id="source",
        checkpoint_ns=checkpoint_ns,
        checkpoint_id=checkpoint_id,
        task_id=f"task-{checkpoint_id}",
        task_path=f"~__pregel_pull, agent-{checkpoint_id}",
        writes=[
            PendingWrite(0, "messages", Serialized("json", b"[1]")),
            PendingWrite(1, "profile", Serialized("msgpack", b"\x81")),
        ],
    )


def test_a_copy_holds_every_row_of_the_source_with_all_its_values(operator):
    actor = Actor.for_user(operator, via_api=True)
    project_id = int(project_default().pk)
    for checkpoint_ns in ("", "child"):
        for checkpoint_id in ("1", "2"):
            _save(actor, project_id, checkpoint_ns, checkpoint_id)
    before = {
        model: _rows(model, "source") for model in (ThreadBlob, ThreadCheckpoint, ThreadWrite)
    }

    copied = thread_copy(
        actor=actor, project_id=project_id, source_thread_id="source", target_thread_id="copy"
    )

    assert copied == 4
    for model, rows in before.items():
        assert len(rows) in (4, 8)
        assert _rows(model, "copy") == rows
        assert _rows(model, "source") == rows
