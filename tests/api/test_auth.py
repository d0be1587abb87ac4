"""Who may call the API: tokens and sessions authenticate, roles' permissions authorize."""

import pytest
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agentops.actors import ActorKind
from audit.models import AuditEvent
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
    assert client.login(username=operator.username, password=PASSWORD)
    response = post_run(client, **plan_body(calc()))
    assert response.status_code == 201
    created = AuditEvent.objects.get(run_id=response.json()["id"], verb="run.created")
    assert created.actor_kind == ActorKind.USER


def test_reviewer_cannot_create_a_run(reviewer_api):
    with assert_unchanged():
        response = post_run(reviewer_api, **plan_body(calc()))
        assert response.status_code == 403


def test_user_without_a_role_cannot_list_runs(seeded):
    assert token_client(make_user("nobody")).get("/api/v1/runs/").status_code == 403


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


def test_create_api_token_creates_then_repeats_the_key(operator, capsys):
    call_command("create_api_token", operator.username)
    key = capsys.readouterr().out.strip()
    assert key == Token.objects.get(user=operator).key
    call_command("create_api_token", operator.username)
    assert capsys.readouterr().out.strip() == key


def test_create_api_token_refuses_an_unknown_user(seeded):
    with pytest.raises(CommandError, match="no user named 'ghost'"):
        call_command("create_api_token", "ghost")


def test_key_printed_by_the_command_authenticates(operator, capsys):
    call_command("create_api_token", operator.username)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {capsys.readouterr().out.strip()}")
    assert client.get("/api/v1/tools/").status_code == 200
