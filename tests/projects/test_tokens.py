"""API tokens and sign-ins tried as an attacker would: revoked, expired, forged and guessed
tokens; password guessing. Each is refused and changes nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from audit.models import AuditEvent
from projects.models import ApiToken
from projects.services import project_default, token_rotate
from runs.models import Run
from testsupport.factories import PASSWORD, make_token, make_user, token_api
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

RUNS = "/api/v1/runs/"


def test_a_revoked_token_is_refused(operator):
    token = make_token(operator)
    assert token_api(token).get(RUNS).status_code == 200
    ApiToken.objects.all().delete()
    assert token_api(token).get(RUNS).status_code == 401


def test_an_expired_token_is_refused_and_removed(operator):
    token = make_token(operator, ttl_seconds=60)
    ApiToken.objects.update(expiry=timezone.now() - timedelta(seconds=1))
    response = token_api(token).post(RUNS, {"agent": "client", "goal": "g"}, format="json")
    assert response.status_code == 401
    assert not ApiToken.objects.exists()
    assert not Run.objects.exists()
    # The removal is audited (tests/projects/test_access_audited.py), nothing else happened.
    assert list(AuditEvent.objects.filter(run_id__isnull=False)) == []


def test_rotation_replaces_a_token_at_once(operator):
    old = make_token(operator, name="ci", ttl_seconds=3600)
    stored = ApiToken.objects.get()
    new_token, new = token_rotate(token=stored)
    assert token_api(old).get(RUNS).status_code == 401
    assert token_api(new).get(RUNS).status_code == 200
    assert (new_token.name, new_token.project, new_token.user) == ("ci", stored.project, operator)
    lifetime = new_token.expiry - new_token.created
    assert timedelta(seconds=3599) < lifetime < timedelta(seconds=3601)


@pytest.mark.parametrize(
    "header",
    [
        "Token " + "0" * 64,
        "Token abc",
        "Token " + "g" * 64,
        "Token " + "a" * 100_000,
        "Token \u00e9\u00e9\u00e9",
        "Token a b",
        "Token",
    ],
)
def test_a_forged_token_is_a_401_never_a_500(seeded, header):
    client = APIClient()
    with assert_unchanged():
        response = client.get(RUNS, HTTP_AUTHORIZATION=header)
    assert response.status_code == 401


def test_a_token_with_a_nul_is_a_401(seeded):
    response = APIClient().get(RUNS, HTTP_AUTHORIZATION="Token " + "a" * 32 + "\x00" + "a" * 31)
    assert response.status_code == 401


def test_anonymous_requests_are_throttled(seeded, monkeypatch):
    # The schema is the one thing anyone may read; the rest answers 401 before throttles.
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "anon", "2/min")
    client = APIClient()
    codes = [client.get("/api/schema/", {"format": "json"}).status_code for _ in range(3)]
    assert codes == [200, 200, 429]


def test_a_token_is_only_for_a_member_of_its_project(seeded):
    from projects.services import token_create

    outsider = make_user("outsider")
    with pytest.raises(Exception, match="not a member"):
        token_create(user=outsider, project=project_default())
    assert not ApiToken.objects.exists()


def test_sign_in_is_locked_after_five_failures(operator):
    client = Client()
    for _ in range(5):
        failed = client.post(
            "/accounts/login/", {"username": operator.username, "password": "wrong"}
        )
        assert failed.status_code in (200, 429)
    locked = client.post("/accounts/login/", {"username": operator.username, "password": PASSWORD})
    assert locked.status_code == 429
    assert "_auth_user_id" not in client.session
    # Another user from the same address still signs in.
    other = make_user("other", "viewer")
    response = Client().post("/accounts/login/", {"username": other.username, "password": PASSWORD})
    assert response.status_code == 302


def test_admin_shows_a_new_token_once_and_lists_only_its_prefix(operator, settings):
    admin_user = make_user("root", superuser=True)
    client = Client()
    client.force_login(admin_user)
    project = project_default()
    response = client.post(
        "/admin/projects/apitoken/add/",
        {"user": operator.pk, "project": project.pk, "name": "deploy bot", "expiry": ""},
        follow=True,
    )
    assert response.status_code == 200
    stored = ApiToken.objects.get(name="deploy bot")
    messages = [str(m) for m in response.context["messages"]]
    text = next(m.split("The token is ")[1].split(" ")[0] for m in messages if "token is" in m)
    assert token_api(text).get(RUNS).status_code == 200
    listing = client.get("/admin/projects/apitoken/").content.decode()
    assert stored.token_key in listing
    assert text not in listing
    assert text not in client.get(f"/admin/projects/apitoken/{stored.pk}/change/").content.decode()


def test_admin_refuses_a_token_for_a_non_member(seeded):
    client = Client()
    client.force_login(make_user("root", superuser=True))
    outsider = make_user("outsider")
    response = client.post(
        "/admin/projects/apitoken/add/",
        {"user": outsider.pk, "project": project_default().pk, "name": "x", "expiry": ""},
    )
    assert response.status_code == 200
    assert "not a member of project default" in response.content.decode()
    assert not ApiToken.objects.exists()


def test_admin_rotates_a_token_and_shows_the_new_one_once(operator):
    old = make_token(operator, name="ci")
    stored = ApiToken.objects.get()
    client = Client()
    client.force_login(make_user("root", superuser=True))
    response = client.post(
        "/admin/projects/apitoken/",
        {"action": "rotate_selected", "_selected_action": [stored.pk]},
        follow=True,
    )
    messages = [str(m) for m in response.context["messages"]]
    new = next(m.split("the new token is ")[1].split(" ")[0] for m in messages if "new token" in m)
    assert token_api(old).get(RUNS).status_code == 401
    assert token_api(new).get(RUNS).status_code == 200
    assert ApiToken.objects.get().name == "ci"
