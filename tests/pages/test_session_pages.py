"""The sessions list and a session's page: its runs, its conversation (the latest
``MESSAGES_SHOWN``, removed items marked, items of any shape rendered as text or JSON), its
state versions with the run page's diff fragment; other projects' sessions are 404."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from agentops.actors import Actor
from projects.models import Project
from projects.roles import Role
from projects.services import project_default
from runs.control.create import run_create
from runs.control.sessions import session_create, session_item_pop, session_items_add
from runs.control.state import session_state_write
from runs.models import AgentSession
from runs.views import MESSAGES_SHOWN
from testsupport.factories import make_user

pytestmark = pytest.mark.django_db


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def session(operator) -> AgentSession:
    return session_create(
        actor=Actor.for_user(operator),
        project=project_default(),
        external_id="chat <b>1</b>",
        subject="user-9",
    )


def test_the_list_links_each_session(operator, session):
    page = signed_in(operator).get(reverse("session-list"))
    assert page.status_code == 200
    html = page.content.decode()
    assert session.get_absolute_url() in html
    assert "chat &lt;b&gt;1&lt;/b&gt;" in html


def test_the_page_shows_runs_items_of_any_shape_and_removed_ones(
    operator, session, django_capture_on_commit_callbacks
):
    actor = Actor.for_user(operator)
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(actor=actor, agent="client", goal="answer <i>me</i>", session=session)
    session_items_add(
        actor=actor,
        session_id=session.pk,
        items=[
            {"role": "user", "content": "<script>alert(1)</script>"},
            {"type": "function_call", "name": "lookup", "arguments": "{}", "call_id": "c"},
            {"type": ["not", "a", "string"], "content": {"deep": [1, 2]}},
            {"role": "assistant", "content": "popped"},
        ],
    )
    session_item_pop(actor=actor, session_id=session.pk)
    html = signed_in(operator).get(session.get_absolute_url()).content.decode()
    assert run.get_absolute_url() in html
    assert "answer &lt;i&gt;me&lt;/i&gt;" in html
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "function_call" in html
    assert html.count("removed ") >= 1
    assert 'data-position="3"' in html


def test_the_page_shows_the_latest_messages_with_a_note(operator, session):
    items = [{"role": "user", "content": f"message {i}"} for i in range(MESSAGES_SHOWN + 5)]
    session_items_add(actor=Actor.for_user(operator), session_id=session.pk, items=items)
    html = signed_in(operator).get(session.get_absolute_url()).content.decode()
    assert f"The last {MESSAGES_SHOWN} of {MESSAGES_SHOWN + 5} messages" in html
    assert "message 4<" not in html
    assert f"message {MESSAGES_SHOWN + 4}" in html


def test_a_state_versions_diff_opens(operator, session):
    for base, state in enumerate([{"lang": "fr"}, {"lang": "de", "tz": "CET"}]):
        session_state_write(
            session_id=session.pk,
            actor=Actor.for_user(operator),
            base_version=base,
            operation="put",
            document=state,
        )
    client = signed_in(operator)
    html = client.get(session.get_absolute_url()).content.decode()
    path = reverse("session-state-version", args=[session.pk, 2])
    assert path in html
    diff = client.get(path)
    assert diff.status_code == 200
    assert 'data-diff-path="/lang"' in diff.content.decode()
    assert client.get(reverse("session-state-version", args=[session.pk, 3])).status_code == 404


def test_another_projects_session_is_404(session):
    other = Project.objects.create(slug="other", name="Other")
    outsider = make_user("otto", Role.OPERATOR, project=other)
    client = signed_in(outsider)
    assert client.get(session.get_absolute_url()).status_code == 404
    fragment = reverse("session-detail-fragment", args=[session.pk])
    assert client.get(fragment).status_code == 404
    assert str(session.pk) not in client.get(reverse("session-list")).content.decode()


def test_the_run_page_links_its_session(operator, session, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(actor=Actor.for_user(operator), agent="client", goal="g", session=session)
    html = signed_in(operator).get(run.get_absolute_url()).content.decode()
    assert f'href="{session.get_absolute_url()}"' in html
    assert "chat &lt;b&gt;1&lt;/b&gt;" in html
