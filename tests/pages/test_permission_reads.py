"""A member's pages are answered from their project roles: Django's model permissions (the
admin's, read from the user's and groups' permission tables) are only read for a check the
roles do not grant, and they still grant what the admin gave."""

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.pages.conftest import CALCULATE
from testsupport.factories import make_user

pytestmark = pytest.mark.django_db


def _model_permission_reads(client, path: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(path).status_code == 200
    return sum('"auth_permission"' in q["sql"] for q in captured.captured_queries)


def test_an_operators_pages_read_no_model_permissions(client, operator, make_run):
    run = make_run([CALCULATE])
    client.force_login(operator)
    for path in (reverse("run-list"), reverse("run-detail", args=[run.pk])):
        assert _model_permission_reads(client, path) == 0, path


def test_a_model_permission_from_the_admin_still_grants_what_roles_do_not(client):
    # A reviewer may not see the workers page through their role; the admin gives them the
    # permission itself.
    reviewer = make_user("rita", "reviewer")
    client.force_login(reviewer)
    assert client.get(reverse("fleet-workers")).status_code == 403
    reviewer.user_permissions.add(Permission.objects.get(codename="resume_run"))
    assert client.get(reverse("fleet-workers")).status_code == 200
