"""Every page asks anonymous visitors to log in; the login page logs them in."""

import uuid

import pytest
from django.urls import reverse

from testsupport.factories import PASSWORD

pytestmark = pytest.mark.django_db

# No run has it (a fixed id: test ids must be the same in every pytest-xdist worker).
UNKNOWN_RUN = uuid.UUID("00000000-0000-4000-8000-000000000001")
PAGES = [
    "/",
    "/fragment/runs/",
    f"/runs/{UNKNOWN_RUN}/",
    f"/runs/{UNKNOWN_RUN}/fragment/",
    "/approvals/",
    "/approvals/fragment/",
    "/approvals/1/",
]


@pytest.mark.parametrize("url", PAGES)
def test_anonymous_visitor_is_redirected_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("url", ["/approvals/1/decide/", "/approvals/bulk/", "/approvals/1/mark/"])
def test_anonymous_decision_is_redirected_to_login(client, url):
    response = client.post(url, {"decision": "approve", "ids": ["1"], "action": "assign"})
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_login_page_logs_in_and_lands_on_runs(client, reviewer):
    page = client.get(reverse("login"))
    assert page.status_code == 200
    assert b'name="password"' in page.content
    response = client.post(reverse("login"), {"username": "rita", "password": PASSWORD})
    assert response.status_code == 302
    assert response["Location"] == reverse("run-list")
    assert client.get(reverse("run-list")).status_code == 200


def test_wrong_password_shows_an_error(client, reviewer):
    response = client.post(reverse("login"), {"username": "rita", "password": "wrong"})
    assert response.status_code == 200
    assert b"didn't match" in response.content


def test_logout_is_a_post_and_returns_to_login(client, reviewer):
    client.force_login(reviewer)
    response = client.post(reverse("logout"))
    assert response.status_code == 302
    assert response["Location"] == reverse("login")


def test_user_without_view_permission_gets_403(client, seeded):
    from testsupport.factories import make_user

    client.force_login(make_user("nobody"))
    assert client.get("/").status_code == 403
    assert client.get("/approvals/").status_code == 403
