"""What a LangGraph thread's ``put`` and ``get_tuple`` cost PostgreSQL (``runs.store.threads``):
a checkpoint of a thread the process saved in before is four round trips and one commit
(BEGIN, the locks, the writes with the audit event, COMMIT: the session's id is remembered, and
looked up again when its session is gone), a page of checkpoints one statement, and both keep
what they did through the ORM: the values each checkpoint names (those kept from
older checkpoints too), its pending writes in LangGraph's order, the audited chain, another
project's thread out of sight."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from agentops.actors import Actor
from audit.models import AuditEvent, session_chain
from audit.selectors import chain_verify
from projects.models import Project
from projects.services import project_default
from runs.control.threads import Blob, PendingWrite, Serialized, checkpoint_put
from runs.control.threads import checkpoint_writes_put as writes_put
from runs.models import AgentSession, ThreadCheckpoint
from runs.thread_selectors import thread_checkpoints
from testsupport.factories import make_user
from testsupport.roundtrips import round_trips

pytestmark = pytest.mark.django_db

THREAD = "ticket-42"


@pytest.fixture
def actor(operator: Any) -> Actor:
    return Actor.for_user(operator, via_api=True)


@pytest.fixture
def project_id() -> int:
    return int(project_default().pk)


def put(actor: Actor, project_id: int, checkpoint_id: str, parent: str, **changed: bytes) -> None:
    """A checkpoint of ``THREAD`` whose channels ``messages`` and ``profile`` are at versions
    ``<checkpoint_id>`` when it changes them (``changed``: channel → value) and at ``1``
    otherwise."""
    versions = {ch: (checkpoint_id if ch in changed else "1") for ch in ("messages", "profile")}
    checkpoint_put(
        actor=actor,
        project_id=project_id,
        thread_id=THREAD,
        checkpoint_ns="",
        checkpoint_id=checkpoint_id,
        parent_checkpoint_id=parent,
        checkpoint=Serialized("msgpack", checkpoint_id.encode()),
        channel_versions=versions,
        metadata={"source": "loop", "step": int(checkpoint_id)},
        blobs=[Blob(ch, versions[ch], Serialized("msgpack", v)) for ch, v in changed.items()],
    )


@pytest.mark.django_db(transaction=True)
def test_a_checkpoint_of_a_known_thread_is_four_round_trips_and_one_commit(actor, project_id):
    put(actor, project_id, "1", "", messages=b"hello", profile=b"gold")
    connection.ensure_connection()
    with round_trips(connection) as trips:
        put(actor, project_id, "2", "1", messages=b"hello again")
    assert (trips.count, trips.commits) == (4, 1)
    saved = ThreadCheckpoint.objects.get(checkpoint_id="2")
    assert (saved.parent_checkpoint_id, bytes(saved.checkpoint_data)) == ("1", b"2")
    assert saved.channel_versions == {"messages": "2", "profile": "1"}
    assert saved.metadata == {"source": "loop", "step": 2}
    session = AgentSession.objects.get(external_id=THREAD)
    events = AuditEvent.objects.filter(chain=session_chain(session.pk)).order_by("id")
    assert [e.verb for e in events] == [
        "session.created",
        "session.checkpoint_saved",
        "session.checkpoint_saved",
    ]
    assert events.last().payload["channels"] == ["messages"]
    assert chain_verify(session_chain(session.pk)).ok


def test_a_thread_whose_session_is_gone_gets_a_new_one(actor, project_id):
    put(actor, project_id, "1", "", messages=b"hello", profile=b"gold")
    first = AgentSession.objects.get(external_id=THREAD)
    AgentSession.objects.filter(pk=first.pk).delete()
    put(actor, project_id, "2", "1", messages=b"hello again", profile=b"gold")
    session = AgentSession.objects.get(external_id=THREAD)
    assert session.pk != first.pk
    (record,) = thread_checkpoints(project_id=project_id, thread_id=THREAD)
    assert (record.checkpoint.session_id, record.checkpoint.checkpoint_id) == (session.pk, "2")


def test_another_projects_thread_of_the_same_id_is_another_session(actor, project_id):
    put(actor, project_id, "1", "", messages=b"ours", profile=b"gold")
    other = Project.objects.create(slug="other", name="Other")
    stranger = Actor.for_user(make_user("stranger", "operator", project=other), via_api=True)
    put(stranger, other.pk, "1", "", messages=b"theirs", profile=b"gold")
    put(actor, project_id, "2", "1", messages=b"ours again")
    assert AgentSession.objects.filter(external_id=THREAD).count() == 2
    ours = thread_checkpoints(project_id=project_id, thread_id=THREAD)
    theirs = thread_checkpoints(project_id=other.pk, thread_id=THREAD)
    assert [r.checkpoint.checkpoint_id for r in ours] == ["2", "1"]
    assert [bytes(b.data) for r in theirs for b in r.blobs if b.channel == "messages"] == [
        b"theirs"
    ]


def test_saving_a_checkpoint_again_replaces_it_and_keeps_the_first_value_of_a_version(
    actor, project_id
):
    put(actor, project_id, "1", "", messages=b"first", profile=b"gold")
    put(actor, project_id, "1", "", messages=b"second", profile=b"gold")
    (record,) = thread_checkpoints(project_id=project_id, thread_id=THREAD)
    assert {b.channel: bytes(b.data) for b in record.blobs} == {
        "messages": b"first",
        "profile": b"gold",
    }
    assert ThreadCheckpoint.objects.count() == 1


def test_the_latest_checkpoint_is_one_statement_with_its_kept_values_and_ordered_writes(
    actor, project_id
):
    put(actor, project_id, "1", "", messages=b"hello", profile=b"gold")
    put(actor, project_id, "2", "1", messages=b"hello again")
    for task, path in (("b-task", "~a"), ("a-task", "~a"), ("c-task", "~0")):
        writes_put(
            actor=actor,
            project_id=project_id,
            thread_id=THREAD,
            checkpoint_ns="",
            checkpoint_id="2",
            task_id=task,
            task_path=path,
            writes=[
                PendingWrite(1, "messages", Serialized("json", b"[2]")),
                PendingWrite(0, "messages", Serialized("json", b"[1]")),
            ],
        )
    connection.ensure_connection()
    with round_trips(connection) as trips:
        (latest,) = thread_checkpoints(
            project_id=project_id, thread_id=THREAD, checkpoint_ns="", limit=1
        )
    assert trips.count == 1
    assert latest.checkpoint.checkpoint_id == "2"
    assert {(b.channel, b.version, b.type, bytes(b.data)) for b in latest.blobs} == {
        ("messages", "2", "msgpack", b"hello again"),
        ("profile", "1", "msgpack", b"gold"),
    }
    assert [(w.task_path, w.task_id, w.idx, bytes(w.data)) for w in latest.writes] == [
        ("~0", "c-task", 0, b"[1]"),
        ("~0", "c-task", 1, b"[2]"),
        ("~a", "a-task", 0, b"[1]"),
        ("~a", "a-task", 1, b"[2]"),
        ("~a", "b-task", 0, b"[1]"),
        ("~a", "b-task", 1, b"[2]"),
    ]


def test_a_page_filters_as_the_orm_did_and_another_projects_thread_is_not_there(actor, project_id):
    for step in range(1, 5):
        put(actor, project_id, str(step), str(step - 1) if step > 1 else "", messages=b"m")
    other = Project.objects.create(slug="other", name="Other")
    stranger = make_user("stranger", "operator", project=other)
    put(Actor.for_user(stranger, via_api=True), other.pk, "9", "", messages=b"theirs")

    def ids(**query: Any) -> list[str]:
        found = thread_checkpoints(project_id=project_id, thread_id=THREAD, **query)
        return [record.checkpoint.checkpoint_id for record in found]

    assert ids() == ["4", "3", "2", "1"]
    assert ids(before="3", limit=1) == ["2"]
    assert ids(checkpoint_id="3") == ["3"]
    assert ids(metadata={"step": 2}) == ["2"]
    assert ids(checkpoint_ns="subgraph") == []
    theirs = thread_checkpoints(project_id=other.pk, thread_id=THREAD)
    assert [record.checkpoint.checkpoint_id for record in theirs] == ["9"]
