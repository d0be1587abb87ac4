"""Users, roles and logins leave events in the system chain, whoever changes them: admin, a
management command or code; in the transaction of the change, never with a password hash."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from django.db import transaction
from django.urls import reverse

from audit.context import process_name
from audit.models import AuditEvent
from audit.selectors import chain_verify
from audit.services import audit_system
from testsupport.factories import PASSWORD

pytestmark = pytest.mark.django_db

User = get_user_model()


# Django groups still exist for admin's own permissions; the product's roles are project
# memberships (``projects``). Two groups to change, as a site might keep them.
OPERATORS, REVIEWERS = "operators", "reviewers"


@pytest.fixture(autouse=True)
def _groups(db: None) -> None:
    reviewers, _ = Group.objects.get_or_create(name=REVIEWERS)
    reviewers.permissions.set(
        Permission.objects.filter(codename__in=["view_run", "decide_approvalrequest"])
    )
    Group.objects.get_or_create(name=OPERATORS)


def _mark() -> int:
    last = AuditEvent.objects.order_by("-id").first()
    return last.pk if last else 0


def _events(after: int, prefix: str = "") -> list[tuple[str, str, dict[str, Any]]]:
    """(verb, object id, payload) of the system-chain events since ``after``."""
    events = AuditEvent.objects.filter(chain="system", id__gt=after, verb__startswith=prefix)
    return [(e.verb, e.object_id, e.payload) for e in events.order_by("id")]


def _actors(after: int, prefix: str = "") -> set[tuple[str, str]]:
    events = AuditEvent.objects.filter(chain="system", id__gt=after, verb__startswith=prefix)
    return set(events.values_list("actor_kind", "actor_name"))


def _fields(username: str, email: str, *, staff: bool = False, superuser: bool = False):
    return {
        "username": username,
        "email": email,
        "is_active": True,
        "is_staff": staff,
        "is_superuser": superuser,
    }


def test_user_group_and_permission_changes_in_code_are_recorded(seeded):
    mark = _mark()
    user = User.objects.create_user("carol", "carol@example.com", PASSWORD)
    user.is_staff = True
    user.save()
    user.set_password("another-password-1234")
    user.save()
    user.save(update_fields=["last_login"])  # not a watched field: no event
    operators, reviewers = Group.objects.get(name=OPERATORS), Group.objects.get(name=REVIEWERS)
    user.groups.add(operators)
    reviewers.user_set.add(user)
    reviewers.user_set.remove(user)
    user.groups.remove(reviewers)  # not a member any more: no event
    user.groups.clear()
    cancel = Permission.objects.get(codename="cancel_run")
    reviewers.permissions.add(cancel)
    cancel.group_set.remove(reviewers)
    user.user_permissions.add(cancel)
    uid, rid = str(user.pk), str(reviewers.pk)
    user.delete()

    assert _events(mark) == [
        ("user.added", uid, {"user": _fields("carol", "carol@example.com")}),
        ("user.changed", uid, {"changed": {"is_staff": [False, True]}}),
        ("user.changed", uid, {"changed": {}, "password_changed": True}),
        ("user.group_added", uid, {"username": "carol", "group": OPERATORS}),
        ("user.group_added", uid, {"username": "carol", "group": REVIEWERS}),
        ("user.group_removed", uid, {"username": "carol", "group": REVIEWERS}),
        ("user.group_removed", uid, {"username": "carol", "group": OPERATORS}),
        ("group.permissions_added", rid, {"group": REVIEWERS, "permissions": ["runs.cancel_run"]}),
        (
            "group.permissions_removed",
            rid,
            {"group": REVIEWERS, "permissions": ["runs.cancel_run"]},
        ),
        ("user.permissions_added", uid, {"username": "carol", "permissions": ["runs.cancel_run"]}),
        ("user.deleted", uid, {"was": _fields("carol", "carol@example.com", staff=True)}),
    ]
    assert _actors(mark) == {("system", process_name())}
    assert all(user.password not in str(payload) for _, _, payload in _events(mark))
    assert chain_verify("system").ok


def test_groups_added_renamed_and_deleted_are_recorded(db):
    mark = _mark()
    group = Group.objects.create(name="auditors")
    group.name = "inspectors"
    group.save()
    gid = str(group.pk)
    group.delete()
    assert _events(mark) == [
        ("group.added", gid, {"name": "auditors"}),
        ("group.changed", gid, {"changed": {"name": ["auditors", "inspectors"]}}),
        ("group.deleted", gid, {"was": {"name": "inspectors"}}),
    ]


def test_a_change_rolled_back_leaves_no_event(operator):
    mark = _mark()
    reviewers = Group.objects.get(name=REVIEWERS)
    written: list[int] = []

    def change_then_fail() -> None:
        with transaction.atomic():
            operator.groups.add(reviewers)
            operator.is_superuser = True
            operator.save()
            written.append(len(_events(mark)))  # in the change's transaction
            raise RuntimeError

    with pytest.raises(RuntimeError):
        change_then_fail()
    assert written == [2]
    assert _events(mark) == []


def test_a_management_command_creating_a_superuser_is_recorded(db):
    mark = _mark()
    call_command("createsuperuser", "--noinput", username="boss", email="boss@example.com")
    boss = User.objects.get(username="boss")
    assert _events(mark) == [
        (
            "user.added",
            str(boss.pk),
            {"user": _fields("boss", "boss@example.com", staff=True, superuser=True)},
        )
    ]
    assert _actors(mark) == {("system", process_name())}


def test_users_added_changed_and_deleted_in_admin_are_recorded(admin_client, admin_user, seeded):
    mark = _mark()
    added = admin_client.post(
        reverse("admin:auth_user_add"),
        {
            "username": "newbie",
            "usable_password": "true",
            "password1": PASSWORD,
            "password2": PASSWORD,
        },
    )
    assert added.status_code == 302, added.content[:500]
    newbie = User.objects.get(username="newbie")
    operators = Group.objects.get(name=OPERATORS)
    changed = admin_client.post(
        reverse("admin:auth_user_change", args=[newbie.pk]),
        {
            "username": "newbie",
            "email": "newbie@example.com",
            "is_active": "on",
            "is_staff": "on",
            "groups": [operators.pk],
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
        },
    )
    assert changed.status_code == 302, changed.content[:500]
    deleted = admin_client.post(
        reverse("admin:auth_user_delete", args=[newbie.pk]), {"post": "yes"}
    )
    assert deleted.status_code == 302
    uid = str(newbie.pk)
    assert _events(mark) == [
        ("user.added", uid, {"user": _fields("newbie", "")}),
        (
            "user.changed",
            uid,
            {"changed": {"email": ["", "newbie@example.com"], "is_staff": [False, True]}},
        ),
        ("user.group_added", uid, {"username": "newbie", "group": OPERATORS}),
        ("user.deleted", uid, {"was": _fields("newbie", "newbie@example.com", staff=True)}),
    ]
    assert _actors(mark) == {("user", admin_user.username)}
    assert AuditEvent.objects.filter(verb="user.added", object_id=uid).get().actor_id == str(
        admin_user.pk
    )


def test_group_permissions_changed_in_admin_are_recorded(admin_client, admin_user, seeded):
    reviewers = Group.objects.get(name=REVIEWERS)
    kept = list(reviewers.permissions.exclude(codename="decide_approvalrequest"))
    cancel = Permission.objects.get(codename="cancel_run")
    mark = _mark()
    response = admin_client.post(
        reverse("admin:auth_group_change", args=[reviewers.pk]),
        {"name": REVIEWERS, "permissions": [p.pk for p in [*kept, cancel]]},
    )
    assert response.status_code == 302, response.content[:500]
    rid = str(reviewers.pk)
    assert _events(mark) == [
        (
            "group.permissions_removed",
            rid,
            {"group": REVIEWERS, "permissions": ["approvals.decide_approvalrequest"]},
        ),
        ("group.permissions_added", rid, {"group": REVIEWERS, "permissions": ["runs.cancel_run"]}),
    ]
    assert _actors(mark) == {("user", admin_user.username)}


def test_logins_failed_succeeded_and_logouts_are_recorded(client, operator):
    mark = _mark()
    failed = client.post(reverse("login"), {"username": "olivia", "password": "wrong"})
    assert failed.status_code == 200
    assert (
        client.post(reverse("login"), {"username": "olivia", "password": PASSWORD}).status_code
        == 302
    )
    assert client.post(reverse("logout")).status_code == 302
    uid = str(operator.pk)
    assert _events(mark) == [
        ("user.login_failed", "", {"username": "olivia", "ip": "127.0.0.1"}),
        ("user.logged_in", uid, {"ip": "127.0.0.1"}),  # last_login changed: no user.changed
        ("user.logged_out", uid, {"ip": "127.0.0.1"}),
    ]
    assert _actors(mark) == {("user", "anonymous"), ("user", "olivia")}


def test_audit_system_records_for_other_apps(operator):
    """The helper other apps call: the request's user or the process as actor by default."""
    mark = _mark()
    event = audit_system(
        verb="token.created", object_type="token", object_id="t1", payload={"user": "olivia"}
    )
    assert event.pk is not None
    assert event.chain == "system"
    assert _events(mark) == [("token.created", "t1", {"user": "olivia"})]
    assert chain_verify("system").ok
