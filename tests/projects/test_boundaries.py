"""Project boundaries, tried as a member of project alpha against project beta: the REST API,
the pages, the inbox and admin never show beta's runs, steps, approvals or events to alpha's
members, and every action on them is refused with nothing changed."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import ApprovalStatus
from projects.models import Project
from projects.services import membership_set
from tests.api.conftest import approval_url, run_url, token_client
from testsupport.factories import EMAIL_ARGS, make_user, run_awaiting_approval
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


class World:
    """Projects alpha and beta, each with an operator, a reviewer and a run waiting at an
    approval gate; ``dual`` is an operator of both."""

    def __init__(self, capture: Any) -> None:
        self.alpha = Project.objects.create(slug="alpha", name="Alpha")
        self.beta = Project.objects.create(slug="beta", name="Beta")
        self.alice = make_user("alice", "operator", project=self.alpha)
        self.rita = make_user("rita-a", "reviewer", project=self.alpha)
        self.bob = make_user("bob", "operator", project=self.beta)
        self.rex = make_user("rex", "reviewer", project=self.beta)
        self.dual = make_user("dual", "operator", project=self.alpha)
        membership_set(project=self.beta, user=self.dual, role="operator")
        self.run_a = run_awaiting_approval(
            self.alice, capture=capture, goal="alpha's run", project=self.alpha
        )
        self.run_b = run_awaiting_approval(
            self.bob, capture=capture, goal="beta's run", project=self.beta
        )
        self.approval_a = self.run_a.approvals.get()
        self.approval_b = self.run_b.approvals.get()
        self.step_b = self.run_b.steps.get(tool="send_email")


@pytest.fixture
def world(seeded: None, django_capture_on_commit_callbacks: Any) -> World:
    return World(django_capture_on_commit_callbacks)


# --- REST API ---------------------------------------------------------------------------


def test_the_runs_list_shows_only_the_members_projects(world):
    api = token_client(world.alice, world.alpha)
    ids = [run["id"] for run in api.get("/api/v1/runs/").json()["results"]]
    assert ids == [str(world.run_a.pk)]
    assert api.get("/api/v1/runs/", {"project": "beta"}).json()["results"] == []
    assert api.get(run_url(world.run_a.pk)).json()["project"] == "alpha"


@pytest.mark.parametrize(
    "path",
    ["", "events", "steps/{step}"],
)
def test_another_projects_run_is_not_found(world, path):
    api = token_client(world.alice, world.alpha)
    response = api.get(run_url(world.run_b.pk, path.format(step=world.step_b.pk)))
    assert response.status_code == 404
    assert response.json() == {"detail": "run not found"}


@pytest.mark.parametrize(
    ("action", "body"),
    [
        ("cancel", {}),
        ("resume", {}),
        ("complete", {}),
        ("fork", {"from_index": 0}),
        ("messages", {"messages": [{"role": "user", "content": "hi"}]}),
        ("steps", {"tool": "send_email", "args": EMAIL_ARGS, "executor": "client"}),
    ],
)
def test_no_action_reaches_another_projects_run(world, action, body):
    api = token_client(world.alice, world.alpha)
    with assert_unchanged():
        response = api.post(run_url(world.run_b.pk, action), body, format="json")
    assert response.status_code == 404


def test_a_client_step_result_cannot_be_reported_into_another_project(world):
    api = token_client(world.alice, world.alpha)
    with assert_unchanged():
        response = api.post(
            run_url(world.run_b.pk, f"steps/{world.step_b.pk}/result"),
            {"result": "forged"},
            format="json",
        )
    assert response.status_code == 404


def test_a_run_cannot_be_created_in_a_project_one_is_not_in(world):
    api = token_client(world.alice, world.alpha)
    with assert_unchanged():
        response = api.post(
            "/api/v1/runs/",
            {"agent": "client", "goal": "sneak in", "project": "beta"},
            format="json",
        )
    assert response.status_code == 400
    assert response.json()["field"] == "project"


def test_a_token_is_confined_to_its_project_even_for_a_member_of_both(world):
    api = token_client(world.dual, world.alpha)
    assert api.get(run_url(world.run_b.pk)).status_code == 404
    with assert_unchanged():
        refused = api.post(
            "/api/v1/runs/", {"agent": "client", "goal": "g", "project": "beta"}, format="json"
        )
    assert refused.status_code == 400
    created = api.post("/api/v1/runs/", {"agent": "client", "goal": "g"}, format="json")
    assert created.status_code == 201
    assert created.json()["project"] == "alpha"
    # The same user's token of beta sees beta, and not alpha.
    beta_api = token_client(world.dual, world.beta)
    assert beta_api.get(run_url(world.run_b.pk)).status_code == 200
    assert beta_api.get(run_url(world.run_a.pk)).status_code == 404


def test_a_member_of_several_projects_names_the_one_to_create_in(world):
    client = Client()
    client.force_login(world.dual)
    with assert_unchanged():
        response = client.post(
            "/api/v1/runs/", {"agent": "client", "goal": "g"}, content_type="application/json"
        )
    assert response.status_code == 400
    assert "alpha, beta" in response.json()["detail"]


def test_approvals_of_another_project_are_neither_listed_nor_decided(world):
    api = token_client(world.rita, world.alpha)
    ids = [a["id"] for a in api.get("/api/v1/approvals/").json()["results"]]
    assert ids == [world.approval_a.pk]
    assert api.get(approval_url(world.approval_b.pk)).status_code == 404
    with assert_unchanged():
        response = api.post(approval_url(world.approval_b.pk, "approve"), {}, format="json")
    assert response.status_code == 404


def test_a_viewer_sees_but_cannot_act(world):
    viewer = make_user("vera", "viewer", project=world.beta)
    api = token_client(viewer, world.beta)
    assert api.get(run_url(world.run_b.pk)).status_code == 200
    with assert_unchanged():
        assert api.post(run_url(world.run_b.pk, "cancel"), {}, format="json").status_code == 403
        decided = api.post(approval_url(world.approval_b.pk, "approve"), {}, format="json")
        assert decided.status_code == 403


# --- pages and inbox --------------------------------------------------------------------


def _signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_runs_page_lists_only_the_members_projects(world):
    html = _signed_in(world.alice).get(reverse("run-list")).content.decode()
    assert "alpha&#x27;s run" in html or "alpha's run" in html
    assert "beta" not in html


@pytest.mark.parametrize("name", ["run-detail", "run-detail-fragment"])
def test_another_projects_run_page_is_not_found(world, name):
    response = _signed_in(world.alice).get(reverse(name, args=[world.run_b.pk]))
    assert response.status_code == 404


@pytest.mark.parametrize("name", ["run-cancel", "run-resume", "run-fork"])
def test_page_actions_on_another_projects_run_are_not_found(world, name):
    client = _signed_in(world.alice)
    with assert_unchanged():
        response = client.post(reverse(name, args=[world.run_b.pk]), {"from_index": "0"})
    assert response.status_code == 404


def test_the_inbox_shows_and_decides_only_the_members_projects(world):
    client = _signed_in(world.rita)
    html = client.get(reverse("approval-inbox")).content.decode()
    assert f'data-approval-id="{world.approval_a.pk}"' in html
    assert f'data-approval-id="{world.approval_b.pk}"' not in html
    with assert_unchanged():
        response = client.post(
            reverse("approval-decide", args=[world.approval_b.pk]),
            {"decision": "approve", "comment": ""},
            follow=True,
        )
    assert f"Approval request {world.approval_b.pk} does not exist" in response.content.decode()
    world.approval_b.refresh_from_db()
    assert world.approval_b.status == ApprovalStatus.PENDING


def test_a_reviewer_of_another_project_cannot_decide_through_the_service(world):
    # The pages and the API refuse first; the service refuses on its own too.
    from django.core.exceptions import PermissionDenied

    from agentops.actors import Actor
    from approvals.services import approval_decide

    with assert_unchanged(), pytest.raises(PermissionDenied, match="project"):
        approval_decide(
            approval_id=world.approval_b.pk,
            actor=Actor.for_user(world.rita),
            decision="approve",
            comment="",
        )


# --- admin --------------------------------------------------------------------------------


def test_admin_shows_staff_only_their_projects_runs_and_events(world):
    world.alice.is_staff = True
    world.alice.save()
    client = _signed_in(world.alice)
    runs = client.get("/admin/runs/run/").content.decode()
    assert "alpha&#x27;s run" in runs or "alpha's run" in runs
    assert "beta&#x27;s run" not in runs
    assert "beta's run" not in runs
    change = client.get(f"/admin/runs/run/{world.run_b.pk}/change/", follow=True)
    assert "beta's run" not in change.content.decode()
    events = client.get("/admin/audit/auditevent/", {"q": str(world.run_b.pk)}).content.decode()
    assert "0 audit events" in events or "0 results" in events
    assert client.get("/admin/projects/project/").status_code == 403
