"""Erasing a subject's data: ``DELETE /api/v1/subjects/{subject}/`` deletes the subject's
sessions (their items, compactions and state) and their runs' conversations and state, keeps
the runs redacted, purges the sessions' audit chains with a redacted event left in the system
chain, answers counts, is idempotent, and is for project admins only."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from audit.models import AuditEvent, session_chain
from projects.roles import Role
from runs.models import AgentSession, Compaction, Message, Run, StateVersion
from tests.api.conftest import RUNS_URL, run_url, token_client
from testsupport.factories import make_user
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

SESSIONS_URL = "/api/v1/sessions/"


def session_with_a_run(api: Any, external_id: str, subject: str) -> tuple[str, str]:
    sid = api.post(
        SESSIONS_URL, {"external_id": external_id, "subject": subject}, format="json"
    ).json()["id"]
    items = {"items": [{"role": "user", "content": f"I am {subject}"}]}
    api.post(f"{SESSIONS_URL}{sid}/messages/", items, format="json")
    api.put(
        f"{SESSIONS_URL}{sid}/state/",
        json.dumps({"name": subject}),
        content_type="application/json",
        HTTP_IF_MATCH=f'"{sid}:0"',
    )
    run = api.post(
        RUNS_URL, {"agent": "client", "goal": "help", "session": sid}, format="json"
    ).json()["id"]
    turn = {"messages": [{"role": "assistant", "content": f"hello {subject}"}]}
    api.post(run_url(run, "messages"), turn, format="json")
    api.put(
        run_url(run, "state"),
        json.dumps({"seen": subject}),
        content_type="application/json",
        HTTP_IF_MATCH=f'"{run}:0"',
    )
    api.post(
        f"{SESSIONS_URL}{sid}/compact/", {"summary": "s", "first": 0, "last": 0}, format="json"
    )
    return sid, run


@pytest.fixture
def admin_api(seeded):
    return token_client(make_user("ada", Role.OPERATOR, Role.REVIEWER))


def test_erasure_deletes_the_subjects_data_and_keeps_others(admin_api):
    sid, run = session_with_a_run(admin_api, "a", "user-1")
    other_sid, other_run = session_with_a_run(admin_api, "b", "user-2")
    response = admin_api.delete("/api/v1/subjects/user-1/")
    assert response.status_code == 200
    assert response.json() == {
        "subject": "user-1",
        "sessions": 1,
        "runs": 1,
        "messages": 2,
        "state_versions": 2,
        "artifacts": 0,
        "memory_items": 0,
        "audit_chains": 1,
    }
    assert not AgentSession.objects.filter(pk=sid).exists()
    assert not Message.objects.filter(run_id=run).exists()
    assert not StateVersion.objects.filter(run_id=run).exists()
    assert not Compaction.objects.filter(session_id=sid).exists()
    kept = Run.objects.get(pk=run)
    assert (kept.message_count, kept.context_tokens, kept.session_id) == (0, 0, None)
    assert "erased_at" in kept.metadata
    # The session's chain is gone; the system chain says so, without the subject id.
    assert not AuditEvent.objects.filter(chain=session_chain(sid)).exists()
    purge = AuditEvent.objects.get(verb="audit.chains_purged")
    assert session_chain(sid) in purge.payload["chains"]
    erased = AuditEvent.objects.get(verb="subject.erased")
    assert erased.object_id == hashlib.sha256(b"user-1").hexdigest()
    assert "user-1" not in json.dumps(erased.payload)
    assert AuditEvent.objects.filter(run_id=run, verb="run.subject_erased").count() == 1
    # The other subject's data is untouched.
    assert AgentSession.objects.filter(pk=other_sid).exists()
    assert Message.objects.filter(session_id=other_sid).count() == 2
    assert StateVersion.objects.filter(run_id=other_run).count() == 1


def test_erasure_is_idempotent(admin_api):
    session_with_a_run(admin_api, "a", "user-1")
    admin_api.delete("/api/v1/subjects/user-1/")
    again = admin_api.delete("/api/v1/subjects/user-1/")
    assert again.status_code == 200
    assert again.json()["sessions"] == again.json()["messages"] == 0


def test_only_project_admins_erase(admin_api):
    session_with_a_run(admin_api, "a", "user-1")
    operator = token_client(make_user("olga", Role.OPERATOR))
    with assert_unchanged():
        assert operator.delete("/api/v1/subjects/user-1/").status_code == 403
    assert AgentSession.objects.filter(subject="user-1").exists()
