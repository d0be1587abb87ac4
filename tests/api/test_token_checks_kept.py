"""An API token checked once is used again without the database (``agentops.tokens``), and is
refused from the very next request once it is revoked, rotated or expired, its user loses the
role or is deactivated; without the shared cache every request is checked in the database."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from agentops import tokens
from projects.models import ApiToken
from projects.services import membership_set, project_default, token_rotate
from runs.models import Run
from testsupport.factories import make_token, token_api
from testsupport.processes import free_port

pytestmark = pytest.mark.django_db

RUNS_URL = "/api/v1/runs/"


def _reads(client: APIClient) -> tuple[int, list[str]]:
    """GET the runs list (which needs a role): its status, and which of the token and
    membership tables its queries read."""
    with CaptureQueriesContext(connection) as queries:
        response = client.get(RUNS_URL)
    tables = []
    for query in queries.captured_queries:
        sql = query["sql"]
        for table in ("projects_apitoken", "projects_membership"):
            if f'FROM "{table}"' in sql or f"FROM {table}" in sql:
                tables.append(table)
    return response.status_code, tables


def test_a_checked_token_is_used_again_without_reading_tokens_or_memberships(operator):
    client = token_api(make_token(operator))
    assert _reads(client) == (200, ["projects_apitoken", "projects_membership"])
    assert _reads(client) == (200, [])
    assert _reads(client) == (200, [])


def test_each_token_stands_for_its_own_user(operator, reviewer, operator_reviewer):
    mine, theirs = token_api(make_token(operator)), token_api(make_token(operator_reviewer))
    for client in (mine, theirs, mine, theirs):  # both kept, neither mixed up
        response = client.post(RUNS_URL, {"agent": "client", "goal": "whose"}, format="json")
        assert response.status_code == 201, response.content
    owners = list(
        Run.objects.order_by("created_at").values_list("requested_by__username", flat=True)
    )
    assert owners == [operator.username, operator_reviewer.username] * 2
    # A reviewer's token cannot create runs, kept or not.
    refused = token_api(make_token(reviewer))
    for _ in range(2):
        assert (
            refused.post(RUNS_URL, {"agent": "client", "goal": "x"}, format="json").status_code
            == 403
        )


def test_a_revoked_or_rotated_token_is_refused_at_once(operator):
    revoked, rotated = make_token(operator, name="revoked"), make_token(operator, name="rotated")
    revoked_client, rotated_client = token_api(revoked), token_api(rotated)
    assert _reads(revoked_client)[0] == _reads(rotated_client)[0] == 200
    assert _reads(revoked_client) == (200, [])

    ApiToken.objects.filter(user=operator, name="revoked").delete()
    assert revoked_client.get(RUNS_URL).status_code == 401
    token_rotate(token=ApiToken.objects.get(user=operator, name="rotated"))
    assert rotated_client.get(RUNS_URL).status_code == 401


def test_a_token_is_refused_once_it_expires(operator, monkeypatch):
    client = token_api(make_token(operator, ttl_seconds=60))
    assert _reads(client) == (200, ["projects_apitoken", "projects_membership"])
    assert _reads(client) == (200, [])
    later = timezone.now() + timedelta(seconds=61)
    monkeypatch.setattr(tokens.timezone, "now", lambda: later)
    assert client.get(RUNS_URL).status_code == 401


def test_a_lost_role_or_a_deactivated_user_is_refused_at_once(operator):
    client = token_api(make_token(operator))
    body: dict[str, Any] = {"agent": "client", "goal": "role"}
    assert client.post(RUNS_URL, body, format="json").status_code == 201
    membership_set(project=project_default(), user=operator, role="viewer")
    assert client.post(RUNS_URL, body, format="json").status_code == 403
    membership_set(project=project_default(), user=operator, role="operator")
    assert client.post(RUNS_URL, body, format="json").status_code == 201
    operator.is_active = False
    operator.save()
    assert client.post(RUNS_URL, body, format="json").status_code == 401
    assert Run.objects.count() == 2


def test_without_the_shared_cache_every_request_is_checked_in_the_database(operator, settings):
    client = token_api(make_token(operator))
    assert _reads(client)[0] == 200
    # Redis cannot be reached: a port nothing listens on.
    unreachable = f"redis://127.0.0.1:{free_port()}/0"
    settings.CACHES = {n: {**c, "LOCATION": unreachable} for n, c in settings.CACHES.items()}
    for _ in range(2):
        assert _reads(client) == (200, ["projects_apitoken", "projects_membership"])


def test_each_request_gets_its_own_user_and_token_objects(operator):
    token = make_token(operator)
    check = tokens.TokenAuthentication()
    user, auth = check.authenticate_credentials(token.encode())
    user._perm_cache = {"approvals.decide_approval"}  # as Django's ModelBackend caches it
    again, auth_again = check.authenticate_credentials(token.encode())
    assert again is not user
    assert auth_again is not auth
    assert (again.pk, auth_again.pk, auth_again.user) == (operator.pk, auth.pk, again)
    assert not hasattr(again, "_perm_cache")


MEMORY_URL = "/api/v1/memory/items/"


def _put(client: APIClient, key: str) -> tuple[str, list[str]]:
    """PUT a memory item in the token's project: the project's slug the answer names, and
    the statements that read the project table."""
    body = {"namespace": ["kept"], "key": key, "value": {"n": 1}}
    with CaptureQueriesContext(connection) as queries:
        response = client.put(MEMORY_URL, body, format="json")
    assert response.status_code == 201, response.content
    read = [q["sql"] for q in queries.captured_queries if 'FROM "projects_project"' in q["sql"]]
    return response.json()["project"], read


def test_a_kept_token_brings_its_project_without_reading_it_again(operator):
    client = token_api(make_token(operator))
    assert _put(client, "first")[0] == "default"  # the token and its project read once
    assert _put(client, "second") == ("default", [])
    assert _put(client, "third") == ("default", [])


def test_a_renamed_project_is_seen_from_the_next_request_on(operator):
    client = token_api(make_token(operator))
    assert _put(client, "before")[0] == "default"
    project = project_default()
    project.slug = "renamed"
    project.save()
    assert _put(client, "after")[0] == "renamed"
