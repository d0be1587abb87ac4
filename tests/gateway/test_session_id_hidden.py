"""An MCP session is its owner's alone (issue 29, item 2): the gateway's bookkeeping finds no
session another caller names, and the session id, of use to its owner only, is shown to
nobody else: not in the run (API, events, pages, admin for staff), not in audit events, and
admin's list of sessions is for superusers. Old runs lose it from their metadata too
(migration ``gateway.0002``)."""

from __future__ import annotations

import importlib
import json
import uuid
from dataclasses import dataclass

import pytest
from django.apps import apps
from django.contrib.auth.models import Permission
from django.test import Client

from agentops.actors import Actor
from audit.models import AuditEvent
from gateway import calls
from gateway.models import McpSession
from gateway.services import upstream_register
from projects.models import Project
from projects.services import membership_set, project_default
from runs.models import Run
from testsupport.factories import make_token, make_user, token_api
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

LOOKUP = {"name": "lookup", "inputSchema": {"type": "object"}, "annotations": {}}


@dataclass(frozen=True)
class Opened:
    session_id: str
    run: Run


@pytest.fixture
def opened(operator, django_capture_on_commit_callbacks) -> Opened:
    """A session (a new id: the gateway remembers sessions per process) opened by
    ``operator`` in the default project, with one call."""
    session_id = uuid.uuid4().hex
    actor = Actor.for_user(operator, via_api=True)
    with django_capture_on_commit_callbacks(execute=True):
        run_id = calls.session_call_step(
            upstream=upstream_register(name="bank", command="true"),
            session_id=session_id,
            actor=actor,
            project_id=project_default().pk,
            client_info=None,
            tool="lookup",
            args={"account": "A-1"},
            spec=LOOKUP,
        ).run_id
    return Opened(session_id, Run.objects.get(pk=run_id))


def test_another_caller_finds_no_session_and_ends_none(opened, operator):
    beta = Project.objects.create(slug="beta", name="Beta")
    intruder = make_user("ivy", "viewer")
    membership_set(project=beta, user=intruder, role="operator")
    membership_set(project=beta, user=operator, role="operator")
    upstream = McpSession.objects.get().upstream
    callers = [(intruder, beta.pk), (operator, beta.pk), (intruder, project_default().pk)]
    for user, project_id in callers:
        actor = Actor.for_user(user, via_api=True)
        with assert_unchanged():
            with pytest.raises(calls.NoSuchSession):
                calls.session_call_step(
                    upstream=upstream,
                    session_id=opened.session_id,
                    actor=actor,
                    project_id=project_id,
                    client_info=None,
                    tool="lookup",
                    args={"account": "A-2"},
                    spec=LOOKUP,
                )
            calls.session_end(session_id=opened.session_id, actor=actor, project_id=project_id)
    # Its owner goes on, and ends it.
    owner = Actor.for_user(operator, via_api=True)
    run_id = calls.session_run(
        upstream=upstream,
        session_id=opened.session_id,
        actor=owner,
        project_id=project_default().pk,
        client_info=None,
    )
    assert run_id == opened.run.pk
    calls.session_end(session_id=opened.session_id, actor=owner, project_id=project_default().pk)
    assert Run.objects.get(pk=run_id).client_done


def test_the_session_id_is_shown_to_no_one_but_superusers_in_admin(opened):
    viewer = make_user("vic", "viewer")
    viewer.is_staff = True
    viewer.save()
    viewer.user_permissions.add(*Permission.objects.filter(content_type__app_label="gateway"))
    api = token_api(make_token(viewer))
    run_url = f"/api/v1/runs/{opened.run.pk}/"
    answers = [api.get(run_url), api.get(f"{run_url}events/"), api.get("/api/v1/runs/")]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert opened.run.metadata["mcp"]["upstream"] == "bank"
    pages = Client()
    pages.force_login(viewer)
    page = pages.get(f"/runs/{opened.run.pk}/")
    run_admin = pages.get(f"/admin/runs/run/{opened.run.pk}/change/")
    assert [page.status_code, run_admin.status_code] == [200, 200]
    shown = [a.content.decode() for a in [*answers, page, run_admin]]
    shown.append(json.dumps(list(AuditEvent.objects.values("payload", "object_id"))))
    shown.append(json.dumps(list(Run.objects.values_list("metadata", "goal"))))
    assert all(opened.session_id not in text for text in shown)
    assert pages.get("/admin/gateway/mcpsession/").status_code == 403
    assert "gateway/mcpsession" not in pages.get("/admin/").content.decode()
    root = Client()
    root.force_login(make_user("root", superuser=True))
    assert opened.session_id in root.get("/admin/gateway/mcpsession/").content.decode()


def test_old_runs_lose_the_session_id_from_their_metadata_and_get_it_back_reversed(opened):
    migration = importlib.import_module(
        "gateway.migrations.0002_mcp_session_id_out_of_run_metadata"
    )
    # As the gateway wrote it before: the id in the run's metadata.
    client = {"name": "c", "version": "1"}
    old = {"mcp": {"upstream": "bank", "session": opened.session_id, "client": client}, "ticket": 7}
    Run.objects.filter(pk=opened.run.pk).update(metadata=old)
    migration.forget_session_ids(apps, None)
    forgotten = {"mcp": {"upstream": "bank", "client": client}, "ticket": 7}
    assert Run.objects.get(pk=opened.run.pk).metadata == forgotten
    migration.restore_session_ids(apps, None)
    assert Run.objects.get(pk=opened.run.pk).metadata == old
