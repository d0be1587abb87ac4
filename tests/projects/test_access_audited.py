"""Who belongs to which project, and which API tokens exist, is audited in the system chain:
memberships added, changed and removed, tokens created and deleted (revoked, rotated, expired),
in the transaction of the change, through code and through admin."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import AuditEvent
from projects.models import ApiToken, Membership, Project
from projects.services import membership_set, token_rotate
from testsupport.factories import make_token, make_user

pytestmark = pytest.mark.django_db


def _since(mark: int, *prefixes: str) -> list[tuple[str, dict[str, Any]]]:
    events = AuditEvent.objects.filter(chain="system", id__gt=mark).order_by("id")
    return [(e.verb, e.payload) for e in events if e.verb.startswith(prefixes)]


def _mark() -> int:
    last = AuditEvent.objects.order_by("-id").first()
    return last.pk if last else 0


def test_memberships_added_changed_and_removed_are_recorded(seeded):
    project = Project.objects.create(slug="alpha", name="Alpha")
    user = make_user("mia")
    mark = _mark()
    membership_set(project=project, user=user, role="viewer")
    membership_set(project=project, user=user, role="viewer")  # no change: no event
    membership_set(project=project, user=user, role="admin")
    Membership.objects.get().delete()
    who = {"username": "mia", "project": "alpha"}
    assert _since(mark, "membership.") == [
        ("membership.added", {**who, "role": "viewer"}),
        ("membership.changed", {**who, "role": ["viewer", "admin"]}),
        ("membership.deleted", {**who, "role": "admin"}),
    ]


def test_tokens_created_rotated_and_revoked_are_recorded_without_the_token(operator):
    mark = _mark()
    text = make_token(operator, name="ci", ttl_seconds=3600)
    stored = ApiToken.objects.get()
    new, new_text = token_rotate(token=stored)
    new.delete()
    events = _since(mark, "token.")
    assert [verb for verb, _ in events] == [
        "token.created",
        "token.created",
        "token.deleted",
        "token.deleted",
    ]
    assert [payload["token_key"] for _, payload in events] == [
        stored.token_key,
        new.token_key,
        stored.token_key,
        new.token_key,
    ]
    assert {(p["name"], p["username"], p["project"]) for _, p in events} == {
        ("ci", "olivia", "default")
    }
    everything = str(list(AuditEvent.objects.values()))
    assert text not in everything
    assert new_text not in everything


def test_an_expired_token_used_is_recorded_as_deleted(operator):
    text = make_token(operator, ttl_seconds=60)
    ApiToken.objects.update(expiry=timezone.now() - timedelta(seconds=1))
    mark = _mark()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {text}")
    assert client.get("/api/v1/runs/").status_code == 401
    assert [verb for verb, _ in _since(mark, "token.")] == ["token.deleted"]


def test_a_membership_added_in_admin_is_recorded_with_the_admin_as_actor(seeded):
    root = make_user("root", superuser=True)
    project = Project.objects.create(slug="alpha", name="Alpha")
    user = make_user("mia")
    client = Client()
    client.force_login(root)
    mark = _mark()
    response = client.post(
        "/admin/projects/membership/add/",
        {"user": user.pk, "project": project.pk, "role": "reviewer"},
    )
    assert response.status_code == 302
    events = AuditEvent.objects.filter(chain="system", id__gt=mark, verb="membership.added")
    assert [(e.actor_name, e.payload["role"]) for e in events] == [("root", "reviewer")]
