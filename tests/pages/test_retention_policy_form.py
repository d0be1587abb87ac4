"""A retention policy's statuses in admin: a checkbox per terminal run status, saved as the
list checked; an open status, an unknown one or none is refused and nothing is saved."""

import re

import pytest
from django.urls import reverse

from runs.models import RetentionPolicy
from testsupport.factories import make_user

pytestmark = pytest.mark.django_db

FORM = {"name": "old runs", "enabled": "on", "agent": "", "ttl_days": 30, "action": "delete"}


@pytest.fixture
def admin_client(client):
    client.force_login(make_user("ada", superuser=True))
    return client


def _checkboxes(html: str) -> dict[str, bool]:
    """``{value: checked}`` of the form's ``statuses`` checkboxes."""
    inputs = re.findall(r'<input type="checkbox" name="statuses"[^>]*>', html)
    return {re.search(r'value="(\w+)"', tag).group(1): " checked" in tag for tag in inputs}  # type: ignore[union-attr]


def test_the_form_offers_a_checkbox_per_terminal_status(admin_client):
    html = admin_client.get(reverse("admin:runs_retentionpolicy_add")).content.decode()
    assert _checkboxes(html) == {
        "succeeded": True,
        "failed": True,
        "cancelled": True,
        "compensated": True,
        "compensation_failed": True,
    }
    assert "<textarea" not in html
    assert "expire after the TTL" in html


def test_the_checked_statuses_are_saved_and_shown_again(admin_client):
    response = admin_client.post(
        reverse("admin:runs_retentionpolicy_add"),
        {**FORM, "statuses": ["succeeded", "cancelled"]},
    )
    assert response.status_code == 302
    policy = RetentionPolicy.objects.get(name="old runs")
    assert policy.statuses == ["succeeded", "cancelled"]
    change = reverse("admin:runs_retentionpolicy_change", args=[policy.pk])
    html = admin_client.get(change).content.decode()
    assert _checkboxes(html) == {
        "succeeded": True,
        "failed": False,
        "cancelled": True,
        "compensated": False,
        "compensation_failed": False,
    }


@pytest.mark.parametrize(
    ("statuses", "message"),
    [
        (["succeeded", "running"], "running is not one of the available choices"),
        (["archived"], "archived is not one of the available choices"),
        ([], "This field is required."),
    ],
)
def test_an_open_unknown_or_missing_status_is_refused(admin_client, statuses, message):
    policy = RetentionPolicy.objects.create(name="kept", ttl_days=90, statuses=["failed"])
    change = reverse("admin:runs_retentionpolicy_change", args=[policy.pk])
    response = admin_client.post(change, {**FORM, "name": "kept", "statuses": statuses})
    assert response.status_code == 200
    assert message in response.content.decode()
    policy.refresh_from_db()
    assert (policy.statuses, policy.ttl_days) == (["failed"], 90)
    assert not RetentionPolicy.objects.filter(name="old runs").exists()
