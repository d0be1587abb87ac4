"""Sessions over the REST API: create, read, list with filters, close; runs that belong to a
session; the session's conversation (items kept verbatim, pop and clear keep the rows),
context and compaction; the session's state (If-Match, 412, 428). Refused requests change
nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from audit.models import AuditEvent, session_chain
from projects.models import Project
from projects.roles import Role
from runs.models import AgentSession, Message, Run
from tests.api.conftest import RUNS_URL, run_url, token_client
from testsupport.factories import make_user
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

SESSIONS_URL = "/api/v1/sessions/"
FUNCTION_CALL = {
    "type": "function_call",
    "call_id": "call_1",
    "name": "lookup",
    "arguments": '{"q": "x"}',
    "id": "fc_1",
}
FUNCTION_OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "found"}


def session_url(session_id: Any, action: str = "") -> str:
    return f"{SESSIONS_URL}{session_id}/{action + '/' if action else ''}"


def open_session(api: Any, external_id: str = "chat-1", **body: Any) -> dict[str, Any]:
    response = api.post(SESSIONS_URL, {"external_id": external_id, **body}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def add(api: Any, sid: str, *items: dict[str, Any]) -> Any:
    return api.post(session_url(sid, "messages"), {"items": list(items)}, format="json")


def test_create_and_read_a_session(operator_api):
    made = open_session(operator_api, subject="user-7", metadata={"lang": "fr"})
    assert made["external_id"] == "chat-1"
    assert made["subject"] == "user-7"
    assert made["status"] == "open"
    assert made["runs"] == []
    assert operator_api.get(session_url(made["id"])).json() == made
    event = AuditEvent.objects.get(verb="session.created")
    assert event.chain == session_chain(made["id"])


def test_an_external_id_is_unique_in_its_project(operator_api):
    open_session(operator_api)
    with assert_unchanged():
        response = operator_api.post(SESSIONS_URL, {"external_id": "chat-1"}, format="json")
    assert response.status_code == 409


@pytest.mark.parametrize(
    "body",
    [{}, {"external_id": ""}, {"external_id": "x", "metadata": []}, {"external_id": "x", "y": 1}],
)
def test_a_malformed_session_is_refused(operator_api, body):
    with assert_unchanged():
        response = operator_api.post(SESSIONS_URL, body, format="json")
    assert response.status_code == 400


def test_the_list_filters_by_subject_status_and_external_id(operator_api):
    a = open_session(operator_api, "a", subject="u1")
    b = open_session(operator_api, "b", subject="u2")
    operator_api.post(session_url(b["id"], "close"), {}, format="json")

    def ids(query: str) -> list[str]:
        response = operator_api.get(SESSIONS_URL + query)
        assert response.status_code == 200
        return [s["id"] for s in response.json()["results"]]

    assert ids("?subject=u1") == [a["id"]]
    assert ids("?status=closed") == [b["id"]]
    assert ids("?external_id=a") == [a["id"]]
    assert set(ids("")) == {a["id"], b["id"]}
    assert operator_api.get(SESSIONS_URL + "?status=nope").status_code == 400


def test_viewers_read_but_do_not_write(operator_api):
    made = open_session(operator_api)
    viewer = token_client(make_user("vera", Role.VIEWER))
    assert viewer.get(session_url(made["id"])).status_code == 200
    with assert_unchanged():
        assert add(viewer, made["id"], {"role": "user", "content": "hi"}).status_code == 403
        assert viewer.post(session_url(made["id"], "close"), {}, format="json").status_code == 403


def test_another_projects_session_is_404(operator_api):
    made = open_session(operator_api)
    other = Project.objects.create(slug="other", name="Other")
    outsider = token_client(make_user("otto", Role.OPERATOR, project=other), other)
    assert outsider.get(session_url(made["id"])).status_code == 404
    assert outsider.get(SESSIONS_URL).json()["results"] == []
    with assert_unchanged():
        assert add(outsider, made["id"], {"role": "user", "content": "x"}).status_code == 404
        body = {"agent": "client", "goal": "g", "session": "chat-1"}
        assert outsider.post(RUNS_URL, body, format="json").status_code == 404


def test_items_round_trip_verbatim_in_order(operator_api):
    sid = open_session(operator_api)["id"]
    items = [
        {"role": "user", "content": "hello"},
        FUNCTION_CALL,
        FUNCTION_OUTPUT,
        {"role": "assistant", "content": [{"type": "output_text", "text": "hi"}], "id": "m1"},
        {"type": "reasoning", "summary": [], "id": "rs_1"},
    ]
    response = add(operator_api, sid, *items)
    assert response.status_code == 201
    assert response.json()["first_position"] == 0
    assert response.json()["message_count"] == 5
    context = operator_api.get(session_url(sid, "context")).json()
    assert context["messages"] == items
    assert "role" not in context["messages"][1]
    last2 = operator_api.get(session_url(sid, "messages") + "?last=2").json()
    assert [m["message"] for m in last2["messages"]] == items[3:]
    assert [m["session_position"] for m in last2["messages"]] == [3, 4]


@pytest.mark.parametrize("items", [[], [1], [{}], "x", [{"content": "a\u0000"}]])
def test_malformed_items_are_refused(operator_api, items):
    sid = open_session(operator_api)["id"]
    with assert_unchanged():
        response = operator_api.post(session_url(sid, "messages"), {"items": items}, format="json")
    assert response.status_code == 400


def test_pop_removes_the_latest_item_and_keeps_the_row(operator_api):
    sid = open_session(operator_api)["id"]
    add(operator_api, sid, {"role": "user", "content": "a"}, {"role": "user", "content": "b"})
    popped = operator_api.post(session_url(sid, "messages/pop"), {}, format="json")
    assert popped.status_code == 200
    assert popped.json() == {"item": {"role": "user", "content": "b"}}
    context = operator_api.get(session_url(sid, "context")).json()
    assert context["messages"] == [{"role": "user", "content": "a"}]
    assert Message.objects.filter(session_id=sid).count() == 2
    assert Message.objects.get(session_id=sid, session_position=1).removed_at is not None
    assert AuditEvent.objects.filter(verb="session.item_popped").count() == 1


def test_clear_empties_the_context_and_pop_then_answers_null(operator_api):
    sid = open_session(operator_api)["id"]
    add(operator_api, sid, {"role": "user", "content": "a"}, FUNCTION_CALL)
    cleared = operator_api.post(session_url(sid, "clear"), {}, format="json")
    assert cleared.json() == {"removed": 2}
    context = operator_api.get(session_url(sid, "context")).json()
    assert context == {"messages": [], "tokens": 0, "compactions": []}
    popped = operator_api.post(session_url(sid, "messages/pop"), {}, format="json")
    assert popped.json() == {"item": None}
    assert Message.objects.filter(session_id=sid, removed_at__isnull=False).count() == 2
    add(operator_api, sid, {"role": "user", "content": "c"})
    assert operator_api.get(session_url(sid, "context")).json()["messages"] == [
        {"role": "user", "content": "c"}
    ]


def test_compaction_leaves_the_summary_and_the_recent_items(operator_api):
    sid = open_session(operator_api)["id"]
    turns = [{"role": "user", "content": f"turn {i} " + "x" * 400} for i in range(4)]
    add(operator_api, sid, *turns)
    before = AgentSession.objects.get(pk=sid).context_tokens
    response = operator_api.post(
        session_url(sid, "compact"), {"summary": "turns 0-1", "first": 0, "last": 1}, format="json"
    )
    assert response.status_code == 201
    context = operator_api.get(session_url(sid, "context")).json()
    assert context["messages"] == [{"role": "system", "content": "turns 0-1"}, *turns[2:]]
    after = AgentSession.objects.get(pk=sid).context_tokens
    assert after == context["tokens"] < before
    with assert_unchanged():
        cut = {"summary": "s", "first": 1, "last": 2}
        assert operator_api.post(session_url(sid, "compact"), cut, format="json").status_code == 400


def test_a_run_in_a_session_appends_to_both_conversations(operator_api):
    sid = open_session(operator_api)["id"]
    add(operator_api, sid, {"role": "user", "content": "before the run"})
    body = {"agent": "client", "goal": "answer", "session": "chat-1"}
    run = operator_api.post(RUNS_URL, body, format="json")
    assert run.status_code == 201, run.content
    run_id = run.json()["id"]
    turn = {"messages": [{"role": "assistant", "content": "from the run"}]}
    assert operator_api.post(run_url(run_id, "messages"), turn, format="json").status_code == 201
    assert Run.objects.get(pk=run_id).session_id is not None
    context = operator_api.get(session_url(sid, "context")).json()["messages"]
    assert context == [
        {"role": "user", "content": "before the run"},
        {"role": "assistant", "content": "from the run"},
    ]
    row = Message.objects.get(run_id=run_id)
    assert (row.position, row.session_position) == (0, 1)
    assert operator_api.get(session_url(sid)).json()["runs"] == [run_id]


def test_a_run_by_session_id_and_refused_sessions(operator_api):
    made = open_session(operator_api)
    body = {"agent": "client", "goal": "g", "session": made["id"]}
    assert operator_api.post(RUNS_URL, body, format="json").status_code == 201
    operator_api.post(session_url(made["id"], "close"), {}, format="json")
    with assert_unchanged():
        assert operator_api.post(RUNS_URL, body, format="json").status_code == 400
        missing = {**body, "session": "nope"}
        assert operator_api.post(RUNS_URL, missing, format="json").status_code == 404


def test_a_closed_session_takes_no_items_or_state(operator_api):
    sid = open_session(operator_api)["id"]
    closed = operator_api.post(session_url(sid, "close"), {}, format="json")
    assert closed.json()["status"] == "closed"
    assert closed.json()["closed_at"] is not None
    with assert_unchanged():
        assert add(operator_api, sid, {"role": "user", "content": "x"}).status_code == 409
        response = operator_api.put(
            session_url(sid, "state"),
            json.dumps({"a": 1}),
            content_type="application/json",
            HTTP_IF_MATCH=f'"{sid}:0"',
        )
        assert response.status_code == 409


def test_session_state_is_versioned_with_if_match(operator_api):
    sid = open_session(operator_api)["id"]
    url = session_url(sid, "state")
    first = operator_api.get(url)
    assert first.json() == {
        "version": 0,
        "state": {},
        "schema_version": 1,
        "upgraded_from": None,
    }
    assert first["ETag"] == f'"{sid}:0"'
    put = operator_api.put(
        url, json.dumps({"lang": "fr"}), content_type="application/json", HTTP_IF_MATCH=f'"{sid}:0"'
    )
    assert put.status_code == 200
    assert put["ETag"] == f'"{sid}:1"'
    patch = operator_api.patch(
        url,
        json.dumps({"tz": "CET"}),
        content_type="application/merge-patch+json",
        HTTP_IF_MATCH=f'"{sid}:1"',
    )
    assert patch.json()["state"] == {"lang": "fr", "tz": "CET"}
    with assert_unchanged():
        stale = operator_api.put(
            url, json.dumps({}), content_type="application/json", HTTP_IF_MATCH=f'"{sid}:1"'
        )
        assert stale.status_code == 412
        assert stale["ETag"] == f'"{sid}:2"'
        missing = operator_api.put(url, json.dumps({}), content_type="application/json")
        assert missing.status_code == 428
        step = operator_api.put(
            url + "?step_index=0",
            json.dumps({}),
            content_type="application/json",
            HTTP_IF_MATCH=f'"{sid}:2"',
        )
        assert step.status_code == 400
    assert operator_api.get(url + "?version=1").json()["state"] == {"lang": "fr"}
    assert AuditEvent.objects.filter(verb="session.state_written").count() == 2


def test_an_unknown_session_is_404(operator_api):
    unknown = "00000000-0000-0000-0000-000000000000"
    assert operator_api.get(session_url(unknown)).status_code == 404
    assert operator_api.get(session_url(unknown, "context")).status_code == 404


def test_the_server_summarizer_compacts_a_session(operator_api, settings):
    settings.AGENTOPS_CONTEXT_KEEP_LAST = 2
    sid = open_session(operator_api)["id"]
    turns = [{"role": "user", "content": f"turn {i}"} for i in range(6)]
    add(operator_api, sid, *turns)
    response = operator_api.post(session_url(sid, "compact"), {}, format="json")
    assert response.status_code == 201
    assert (response.json()["first"], response.json()["last"]) == (1, 3)
    context = operator_api.get(session_url(sid, "context")).json()["messages"]
    assert context[0] == turns[0]
    assert context[1]["role"] == "system"
    assert context[2:] == turns[4:]
