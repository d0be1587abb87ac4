"""Who may call the API: tokens and sessions authenticate, roles' permissions authorize."""

import hashlib

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from agentops.actors import ActorKind
from audit.models import AuditEvent
from projects.models import ApiToken, Project
from tests.api.conftest import approval_url, calc, email_step, plan_body, post_run, token_client
from testsupport.factories import PASSWORD, make_user
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


def test_request_without_credentials_is_a_401_with_a_token_challenge(seeded):
    response = APIClient().get("/api/v1/runs/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_unknown_token_is_a_401(seeded):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-key")
    assert client.get("/api/v1/runs/").status_code == 401


def test_token_authenticates_a_client_app(operator_api):
    assert operator_api.get("/api/v1/runs/").status_code == 200


def test_session_authenticates_the_browser_as_a_user(operator):
    client = APIClient()
    signed_in = client.post(
        "/accounts/login/",
        {"username": operator.username, "password": PASSWORD},
        format="multipart",
    )
    assert signed_in.status_code == 302
    response = post_run(client, **plan_body(calc()))
    assert response.status_code == 201
    created = AuditEvent.objects.get(run_id=response.json()["id"], verb="run.created")
    assert created.actor_kind == ActorKind.USER


def test_reviewer_cannot_create_a_run(reviewer_api):
    with assert_unchanged():
        response = post_run(reviewer_api, **plan_body(calc()))
        assert response.status_code == 403


def test_user_without_a_role_cannot_list_runs(seeded):
    client = APIClient()
    client.force_login(make_user("nobody"))
    assert client.get("/api/v1/runs/").status_code == 403


def test_superuser_may_do_everything(seeded):
    admin = token_client(make_user("root", superuser=True))
    run = post_run(admin, **plan_body(calc())).json()
    assert admin.post(f"/api/v1/runs/{run['id']}/cancel/").status_code == 200


def test_operator_cannot_decide_approvals(operator_api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run = post_run(operator_api, **plan_body(email_step())).json()
    approval = operator_api.get(f"/api/v1/runs/{run['id']}/").json()["steps"][0]["approval"]
    assert approval["status"] == "pending"
    with assert_unchanged():
        response = operator_api.post(approval_url(approval["id"], "approve"), {}, format="json")
    assert response.status_code == 403


def test_reviewer_cannot_cancel_a_run(operator_api, reviewer_api):
    run = post_run(operator_api, **plan_body(calc())).json()
    with assert_unchanged():
        assert reviewer_api.post(f"/api/v1/runs/{run['id']}/cancel/").status_code == 403
    assert reviewer_api.get(f"/api/v1/runs/{run['id']}/").status_code == 200


def test_create_api_token_prints_a_new_token_each_time_and_stores_only_its_digest(operator, capsys):
    call_command("create_api_token", operator.username, "--name", "ci")
    first = capsys.readouterr().out.strip()
    call_command("create_api_token", operator.username)
    second = capsys.readouterr().out.strip()
    assert len(first) == 64
    assert first != second
    stored = ApiToken.objects.get(name="ci")
    assert stored.digest == hashlib.sha512(first.encode()).hexdigest()
    row = str(list(ApiToken.objects.values()))
    assert first not in row
    assert second not in row
    assert stored.project.slug == "default"
    assert stored.expiry is not None


def test_create_api_token_refuses_a_project_the_user_is_not_in(operator, seeded):
    Project.objects.create(slug="other", name="Other")
    with pytest.raises(CommandError, match="not a member of project other"):
        call_command("create_api_token", operator.username, "--project", "other")
    assert not ApiToken.objects.exists()


def test_create_api_token_refuses_an_unknown_user(seeded):
    with pytest.raises(CommandError, match="no user named 'ghost'"):
        call_command("create_api_token", "ghost")


def test_key_printed_by_the_command_authenticates(operator, capsys):
    call_command("create_api_token", operator.username)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {capsys.readouterr().out.strip()}")
    assert client.get("/api/v1/tools/").status_code == 200
