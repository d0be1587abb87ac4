"""The threads API (``/api/v1/threads/``) that ``AgentOpsSaver`` calls, as an attacker and a
careless client use it: another project's thread is not there, malformed input is a 400 that
changes nothing, a viewer reads but saves nothing, a closed session takes no checkpoint, a
DeltaChannel thread is not pruned to its latest checkpoint, and every change is audited in the
session's chain."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from agentops.actors import Actor
from audit.models import AuditEvent, session_chain
from projects.models import ApiToken, Project
from projects.roles import Role
from runs.control.sessions import session_close
from runs.models import AgentSession, ThreadBlob, ThreadCheckpoint, ThreadWrite
from testsupport.factories import make_token, make_user, token_api
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

URL = "/api/v1/threads/"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def checkpoint_body(thread: str, checkpoint_id: str, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "thread_id": thread,
        "checkpoint_ns": "",
        "checkpoint_id": checkpoint_id,
        "parent_checkpoint_id": "",
        "checkpoint": {"type": "json", "data": b64(b'{"v": 4}')},
        "channel_versions": {"messages": "1"},
        "metadata": {"source": "loop", "step": 0},
        "blobs": [{"channel": "messages", "version": "1", "type": "json", "data": b64(b"[1]")}],
    }
    body.update(fields)
    return body


@pytest.fixture
def api(seeded: None) -> Any:
    return token_api(make_token(make_user("graph", Role.OPERATOR)))


def put(api: Any, thread: str, checkpoint_id: str, **fields: Any) -> Any:
    return api.post(
        URL + "checkpoints/", checkpoint_body(thread, checkpoint_id, **fields), format="json"
    )


def page(api: Any, **params: Any) -> list[dict[str, Any]]:
    answer = api.get(URL + "checkpoints/", params)
    assert answer.status_code == 200, answer.json()
    return answer.json()["checkpoints"]


def test_a_checkpoint_opens_the_threads_session_and_is_audited(api):
    assert put(api, "t-1", "0001").status_code == 201
    session = AgentSession.objects.get(external_id="t-1")
    assert session.metadata == {"langgraph": True}
    [saved] = page(api, thread_id="t-1")
    assert saved["checkpoint_id"] == "0001"
    assert saved["blobs"] == [
        {"channel": "messages", "version": "1", "type": "json", "data": b64(b"[1]")}
    ]
    verbs = list(
        AuditEvent.objects.filter(chain=session_chain(session.pk))
        .order_by("id")
        .values_list("verb", flat=True)
    )
    assert verbs == ["session.created", "session.checkpoint_saved"]


def test_another_projects_thread_is_not_there(api, seeded):
    assert put(api, "t-1", "0001").status_code == 201
    other = Project.objects.create(slug="other", name="Other")
    outsider = token_api(make_token(make_user("otto", Role.OPERATOR, project=other), other))
    assert page(outsider, thread_id="t-1") == []
    with assert_unchanged():
        assert (
            outsider.post(
                URL + "copy/",
                {"source_thread_id": "t-1", "target_thread_id": "mine"},
                format="json",
            ).status_code
            == 404
        )
        assert outsider.post(URL + "delete/", {"thread_id": "t-1"}, format="json").json() == {
            "count": 0
        }
        assert (
            outsider.post(
                URL + "prune/", {"thread_ids": ["t-1"], "strategy": "delete"}, format="json"
            ).status_code
            == 200
        )
        # Naming the other project outright is refused too.
        answer = outsider.get(URL + "checkpoints/", {"thread_id": "t-1", "project": "default"})
        assert answer.status_code == 400
    # Its writes to "t-1" go to a thread of its own project.
    write = {"idx": 0, "channel": "c", "type": "json", "data": b64(b"1")}
    writes = {"thread_id": "t-1", "checkpoint_id": "0001", "task_id": "x", "writes": [write]}
    assert outsider.post(URL + "writes/", writes, format="json").status_code == 201
    assert page(api, thread_id="t-1")[0]["writes"] == []


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"checkpoint": {"type": "json", "data": "not base64!"}}, "checkpoint.data"),
        ({"thread_id": "nul\x00byte"}, "thread_id"),
        ({"thread_id": "x" * 256}, "thread_id"),
        ({"metadata": {"deep": {"text": "nul\x00"}}}, "metadata"),
        ({"metadata": ["not", "an", "object"]}, "metadata"),
        ({"channel_versions": {"messages": {"v": 1}}}, "channel_versions.messages"),
        ({"blobs": [{"channel": "a", "version": "1", "type": "json"}]}, "blobs[0].data"),
        ({"surprise": True}, "surprise"),
    ],
)
def test_malformed_checkpoints_are_refused_and_change_nothing(api, fields, field):
    assert put(api, "t-1", "0001").status_code == 201
    with assert_unchanged():
        answer = put(api, "t-1", "0002", **fields)
    assert answer.status_code == 400, answer.json()
    # The parser names a string it cannot store in ``detail``, the serializers in ``field``.
    assert answer.json().get("field") == field or f"body.{field}" in answer.json()["detail"]


def test_malformed_queries_are_refused(api):
    for params in ({"thread_id": "t", "limit": 0}, {"thread_id": "t", "metadata": "[1]"}, {}):
        assert api.get(URL + "checkpoints/", params).status_code == 400


def test_a_viewer_reads_threads_but_saves_nothing(api, seeded):
    assert put(api, "t-1", "0001").status_code == 201
    viewer = token_api(make_token(make_user("vera", Role.VIEWER)))
    assert [c["checkpoint_id"] for c in page(viewer, thread_id="t-1")] == ["0001"]
    with assert_unchanged():
        assert put(viewer, "t-1", "0002").status_code == 403
        assert viewer.post(URL + "delete/", {"thread_id": "t-1"}, format="json").status_code == 403
        assert (
            viewer.post(URL + "prune/", {"thread_ids": ["t-1"]}, format="json").status_code == 403
        )


def test_a_revoked_token_reads_and_saves_nothing(seeded):
    user = make_user("rita", Role.OPERATOR)
    client = token_api(make_token(user))
    assert put(client, "t-1", "0001").status_code == 201
    ApiToken.objects.filter(user=user).delete()  # revoked: tokens are revoked by deletion
    with assert_unchanged():
        assert client.get(URL + "checkpoints/", {"thread_id": "t-1"}).status_code == 401
        assert put(client, "t-1", "0002").status_code == 401


def test_a_closed_sessions_thread_takes_no_checkpoint(api):
    assert put(api, "t-1", "0001").status_code == 201
    session = AgentSession.objects.get(external_id="t-1")
    session_close(actor=Actor.system(), session_id=session.pk)
    with assert_unchanged():
        assert put(api, "t-1", "0002", parent_checkpoint_id="0001").status_code == 409


def test_writes_that_arrive_before_their_checkpoint_are_shown_with_it(api):
    # LangGraph saves a checkpoint and the writes after it from different threads.
    write = {"idx": 0, "channel": "c", "type": "json", "data": b64(b"1")}
    body = {"thread_id": "t-1", "checkpoint_id": "0001", "task_id": "task", "writes": [write]}
    assert api.post(URL + "writes/", body, format="json").status_code == 201
    assert page(api, thread_id="t-1") == []
    assert put(api, "t-1", "0001").status_code == 201
    [saved] = page(api, thread_id="t-1")
    assert saved["writes"] == [{"task_id": "task", "task_path": "", **write}]


def test_keep_latest_refuses_a_delta_channel_thread_and_prunes_nothing(api):
    assert put(api, "plain", "0001").status_code == 201
    assert put(api, "plain", "0002", parent_checkpoint_id="0001").status_code == 201
    delta = {"source": "loop", "step": 1, "counters_since_delta_snapshot": {"messages": 1}}
    assert put(api, "delta", "0001").status_code == 201
    assert put(api, "delta", "0002", parent_checkpoint_id="0001", metadata=delta).status_code == 201
    with assert_unchanged():
        answer = api.post(URL + "prune/", {"thread_ids": ["plain", "delta"]}, format="json")
    assert answer.status_code == 409
    assert "DeltaChannel" in answer.json()["detail"]
    assert api.post(URL + "prune/", {"thread_ids": ["plain"]}, format="json").json() == {"count": 1}
    assert [c["checkpoint_id"] for c in page(api, thread_id="plain")] == ["0002"]


def test_keep_latest_keeps_the_values_the_latest_checkpoint_names(api):
    blob = {"channel": "a", "version": "1", "type": "json", "data": b64(b'"old"')}
    assert put(api, "t", "0001", channel_versions={"a": "1"}, blobs=[blob]).status_code == 201
    newer = {"channel": "b", "version": "1", "type": "json", "data": b64(b'"b"')}
    versions = {"a": "1", "b": "1"}
    assert put(api, "t", "0002", channel_versions=versions, blobs=[newer]).status_code == 201
    replaced = {"channel": "b", "version": "2", "type": "json", "data": b64(b'"b2"')}
    versions = {"a": "1", "b": "2"}
    assert put(api, "t", "0003", channel_versions=versions, blobs=[replaced]).status_code == 201
    assert api.post(URL + "prune/", {"thread_ids": ["t"]}, format="json").json() == {"count": 2}
    kept = sorted(ThreadBlob.objects.values_list("channel", "version"))
    assert kept == [("a", "1"), ("b", "2")]
    [latest] = page(api, thread_id="t")
    assert {b["channel"]: b["version"] for b in latest["blobs"]} == {"a": "1", "b": "2"}


def test_a_copy_onto_a_thread_with_checkpoints_is_refused(api):
    assert put(api, "src", "0001").status_code == 201
    assert put(api, "dst", "0009").status_code == 201
    body = {"source_thread_id": "src", "target_thread_id": "dst"}
    with assert_unchanged():
        assert api.post(URL + "copy/", body, format="json").status_code == 409
        same = {"source_thread_id": "src", "target_thread_id": "src"}
        assert api.post(URL + "copy/", same, format="json").status_code == 400


def test_delete_takes_checkpoints_values_and_writes_and_keeps_the_session(api):
    assert put(api, "t-1", "0001").status_code == 201
    write = {"idx": 0, "channel": "c", "type": "json", "data": b64(b"1")}
    body = {"thread_id": "t-1", "checkpoint_id": "0001", "task_id": "task", "writes": [write]}
    assert api.post(URL + "writes/", body, format="json").status_code == 201
    assert put(api, "t-2", "0001").status_code == 201
    assert api.post(URL + "delete/", {"thread_id": "t-1"}, format="json").json() == {"count": 1}
    assert not ThreadWrite.objects.filter(session__external_id="t-1").exists()
    assert list(ThreadCheckpoint.objects.values_list("session__external_id", flat=True)) == ["t-2"]
    assert ThreadBlob.objects.filter(session__external_id="t-1").count() == 0
    assert AgentSession.objects.filter(external_id="t-1").exists()
