"""Users, roles and logins in the ``system`` audit chain, from Django's signals: changes made in
admin, by management commands and by code alike. Connected by ``AuditConfig.ready``.

Events (``object_type`` ``user`` or ``group``, ``object_id`` its primary key):

- ``user.added`` ``{"user": {fields}}``, ``user.changed`` ``{"changed": {field: [old, new]}}``
  plus ``"password_changed": true`` when the password changed (never the hash), and
  ``user.deleted`` ``{"was": {fields}}``, where fields are ``USER_FIELDS``;
- ``user.group_added`` / ``user.group_removed`` ``{"username", "group"}``, one per user and
  group, whichever side of the relation changed;
- ``user.permissions_added`` / ``_removed`` and ``group.permissions_added`` / ``_removed``
  ``{"username"|"group", "permissions": ["app_label.codename", ...]}``;
- ``group.added`` ``{"name"}``, ``group.changed`` ``{"changed": {"name": [old, new]}}``,
  ``group.deleted`` ``{"was": {"name"}}``;
- ``membership.added`` / ``membership.deleted`` ``{"username", "project", "role"}``,
  ``membership.changed`` with ``"role": [old, new]``: who belongs to which project as what;
- ``token.created`` / ``token.deleted`` (revoked, expired or rotated away) ``{"token_key",
  "name", "username", "project", "expiry"}`` (``object_id`` the token's stored prefix; the
  token itself is never stored, so never recorded);
- ``user.logged_in`` / ``user.logged_out`` ``{"ip"}`` by that user, ``user.login_failed``
  ``{"username", "ip"}`` by an anonymous user.

Each is written in the transaction of the change when it has one (admin, ``delete()``, m2m
changes), else right after it in a transaction of its own (``save()`` in autocommit, logins).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model, user_logged_in, user_logged_out
from django.contrib.auth.models import Group, Permission
from django.contrib.auth.signals import user_login_failed
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_save

from agentops.actors import Actor, ActorKind
from audit.context import client_ip
from audit.services import audit_system
from projects.models import ApiToken, Membership

USER_FIELDS = ("username", "email", "is_active", "is_staff", "is_superuser")
_BEFORE = "_audit_before"
_CLEARED = "_audit_cleared"


def _user_fields(user: Any) -> dict[str, Any]:
    return {name: getattr(user, name) for name in USER_FIELDS}


def _user_before_save(sender: Any, instance: Any, update_fields: Any = None, **kwargs: Any) -> None:
    watched = {*USER_FIELDS, "password"}
    if instance._state.adding or (update_fields is not None and not watched & set(update_fields)):
        return
    stored = sender.objects.filter(pk=instance.pk).values(*watched).first()
    setattr(instance, _BEFORE, stored)


def _user_saved(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    if created:
        audit_system(
            verb="user.added",
            object_type="user",
            object_id=instance.pk,
            payload={"user": _user_fields(instance)},
        )
        return
    before = instance.__dict__.pop(_BEFORE, None)
    if before is None:
        return
    after = _user_fields(instance)
    payload: dict[str, Any] = {
        "changed": {k: [before[k], v] for k, v in after.items() if before[k] != v}
    }
    if before["password"] != instance.password:
        payload["password_changed"] = True
    if payload["changed"] or "password_changed" in payload:
        audit_system(
            verb="user.changed", object_type="user", object_id=instance.pk, payload=payload
        )


def _user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    audit_system(
        verb="user.deleted",
        object_type="user",
        object_id=instance.pk,
        payload={"was": _user_fields(instance)},
    )


def _group_before_save(sender: Any, instance: Any, **kwargs: Any) -> None:
    if not instance._state.adding:
        setattr(instance, _BEFORE, sender.objects.filter(pk=instance.pk).values("name").first())


def _group_saved(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    if created:
        audit_system(
            verb="group.added",
            object_type="group",
            object_id=instance.pk,
            payload={"name": instance.name},
        )
        return
    before = instance.__dict__.pop(_BEFORE, None)
    if before is not None and before["name"] != instance.name:
        audit_system(
            verb="group.changed",
            object_type="group",
            object_id=instance.pk,
            payload={"changed": {"name": [before["name"], instance.name]}},
        )


def _group_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    audit_system(
        verb="group.deleted",
        object_type="group",
        object_id=instance.pk,
        payload={"was": {"name": instance.name}},
    )


def _changed_pks(instance: Any, action: str, related: Any, pk_set: Any) -> tuple[str, set[Any]]:
    """("added" or "removed", the related primary keys really added or removed), or ("", set())
    for the signals that change nothing yet. ``related`` is ``instance``'s manager of the
    relation; the ids before a remove or clear are kept on ``instance`` until after it."""
    if action == "pre_clear":
        setattr(instance, _CLEARED, set(related.values_list("pk", flat=True)))
    elif action == "pre_remove":
        present = related.filter(pk__in=pk_set).values_list("pk", flat=True)
        setattr(instance, _CLEARED, set(present))
    elif action == "post_add":
        return "added", set(pk_set or ())
    elif action in ("post_remove", "post_clear"):
        return "removed", instance.__dict__.pop(_CLEARED, set())
    return "", set()


def _memberships_changed(
    sender: Any, instance: Any, action: str, reverse: bool, pk_set: Any, **kwargs: Any
) -> None:
    related = instance.user_set if reverse else instance.groups
    what, pks = _changed_pks(instance, action, related, pk_set)
    if not pks:
        return
    users = get_user_model()
    if reverse:
        pairs = [(user, instance) for user in users.objects.filter(pk__in=pks).order_by("pk")]
    else:
        pairs = [(instance, group) for group in Group.objects.filter(pk__in=pks).order_by("pk")]
    for user, group in pairs:
        audit_system(
            verb=f"user.group_{what}",
            object_type="user",
            object_id=user.pk,
            payload={"username": user.get_username(), "group": group.name},
        )


def _permission_names(permissions: Any) -> list[str]:
    return sorted(
        f"{app}.{codename}"
        for app, codename in permissions.values_list("content_type__app_label", "codename")
    )


def _permissions_changed(
    holder: str, instance: Any, action: str, reverse: bool, pk_set: Any
) -> None:
    """Permissions of groups (``holder`` "group") or users ("user") added or removed, one
    event per group or user, from either side of the relation."""
    holders: Any = Group.objects if holder == "group" else get_user_model().objects
    if reverse:  # ``instance`` is a permission, ``pk_set`` groups or users
        related = getattr(instance, f"{holder}_set")
    else:
        related = instance.permissions if holder == "group" else instance.user_permissions
    what, pks = _changed_pks(instance, action, related, pk_set)
    if not pks:
        return
    if reverse:
        names = _permission_names(Permission.objects.filter(pk=instance.pk))
        changes = [(obj, names) for obj in holders.filter(pk__in=pks).order_by("pk")]
    else:
        changes = [(instance, _permission_names(Permission.objects.filter(pk__in=pks)))]
    for obj, permissions in changes:
        name = obj.name if isinstance(obj, Group) else obj.get_username()
        audit_system(
            verb=f"{holder}.permissions_{what}",
            object_type=holder,
            object_id=obj.pk,
            payload={
                "group" if holder == "group" else "username": name,
                "permissions": permissions,
            },
        )


def _group_permissions_changed(sender: Any, **kwargs: Any) -> None:
    _permissions_changed("group", **_relation_args(kwargs))


def _user_permissions_changed(sender: Any, **kwargs: Any) -> None:
    _permissions_changed("user", **_relation_args(kwargs))


def _relation_args(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {name: kwargs[name] for name in ("instance", "action", "reverse", "pk_set")}


def _logged_in(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    audit_system(
        actor=Actor.for_user(user),
        verb="user.logged_in",
        object_type="user",
        object_id=user.pk,
        payload={"ip": client_ip(request)},
    )


def _logged_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    if user is None or not user.is_authenticated:
        return
    audit_system(
        actor=Actor.for_user(user),
        verb="user.logged_out",
        object_type="user",
        object_id=user.pk,
        payload={"ip": client_ip(request)},
    )


def _login_failed(
    sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any
) -> None:
    username = str(credentials.get(get_user_model().USERNAME_FIELD, ""))
    audit_system(
        actor=Actor(kind=ActorKind.USER, name="anonymous"),
        verb="user.login_failed",
        object_type="user",
        object_id="",
        payload={"username": username[:150], "ip": client_ip(request)},
    )


def _project_member_before_save(sender: Any, instance: Membership, **kwargs: Any) -> None:
    if not instance._state.adding:
        stored = sender.objects.filter(pk=instance.pk).values_list("role", flat=True).first()
        setattr(instance, _BEFORE, stored)


def _project_member_saved(sender: Any, instance: Membership, created: bool, **kwargs: Any) -> None:
    who: dict[str, Any] = {
        "username": instance.user.get_username(),
        "project": instance.project.slug,
    }
    if created:
        verb, payload = "membership.added", {**who, "role": instance.role}
    else:
        before = getattr(instance, _BEFORE, None)
        if before == instance.role:
            return
        verb, payload = "membership.changed", {**who, "role": [before, instance.role]}
    audit_system(verb=verb, object_type="membership", object_id=instance.pk, payload=payload)


def _project_member_deleted(sender: Any, instance: Membership, **kwargs: Any) -> None:
    audit_system(
        verb="membership.deleted",
        object_type="membership",
        object_id=instance.pk,
        payload={
            "username": instance.user.get_username(),
            "project": instance.project.slug,
            "role": instance.role,
        },
    )


def _token_fields(token: ApiToken) -> dict[str, Any]:
    # The stored prefix names a token; the token itself is never stored, so never recorded.
    return {
        "token_key": token.token_key,
        "name": token.name,
        "username": token.user.get_username(),
        "project": token.project.slug,
        "expiry": token.expiry.isoformat() if token.expiry else None,
    }


def _token_saved(sender: Any, instance: ApiToken, created: bool, **kwargs: Any) -> None:
    if created:
        audit_system(
            verb="token.created",
            object_type="token",
            object_id=instance.token_key,
            payload=_token_fields(instance),
        )


def _token_deleted(sender: Any, instance: ApiToken, **kwargs: Any) -> None:
    audit_system(
        verb="token.deleted",
        object_type="token",
        object_id=instance.token_key,
        payload=_token_fields(instance),
    )


def connect() -> None:
    """Connect the receivers (once: each has a ``dispatch_uid``)."""
    users = get_user_model()
    pre_save.connect(
        _project_member_before_save, sender=Membership, dispatch_uid="audit.membership.pre_save"
    )
    post_save.connect(
        _project_member_saved, sender=Membership, dispatch_uid="audit.membership.post_save"
    )
    post_delete.connect(
        _project_member_deleted, sender=Membership, dispatch_uid="audit.membership.post_delete"
    )
    post_save.connect(_token_saved, sender=ApiToken, dispatch_uid="audit.token.post_save")
    post_delete.connect(_token_deleted, sender=ApiToken, dispatch_uid="audit.token.post_delete")
    pre_save.connect(_user_before_save, sender=users, dispatch_uid="audit.user.pre_save")
    post_save.connect(_user_saved, sender=users, dispatch_uid="audit.user.post_save")
    post_delete.connect(_user_deleted, sender=users, dispatch_uid="audit.user.post_delete")
    pre_save.connect(_group_before_save, sender=Group, dispatch_uid="audit.group.pre_save")
    post_save.connect(_group_saved, sender=Group, dispatch_uid="audit.group.post_save")
    post_delete.connect(_group_deleted, sender=Group, dispatch_uid="audit.group.post_delete")
    m2m_changed.connect(
        _memberships_changed, sender=users.groups.through, dispatch_uid="audit.user.groups"
    )
    m2m_changed.connect(
        _group_permissions_changed,
        sender=Group.permissions.through,
        dispatch_uid="audit.group.permissions",
    )
    m2m_changed.connect(
        _user_permissions_changed,
        sender=users.user_permissions.through,
        dispatch_uid="audit.user.permissions",
    )
    user_logged_in.connect(_logged_in, dispatch_uid="audit.user.logged_in")
    user_logged_out.connect(_logged_out, dispatch_uid="audit.user.logged_out")
    user_login_failed.connect(_login_failed, dispatch_uid="audit.user.login_failed")
