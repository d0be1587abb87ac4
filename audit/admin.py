"""Admin for the audit log (read-only), and the read-only base used by the other apps' admins."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import transaction
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html

from agentops.actors import Actor
from audit.models import AuditEvent
from audit.services import audit_record
from projects.admin import ProjectScopedAdminMixin


class ReadOnlyAdminMixin:
    """Shows rows without add, change or delete: the model changes only through its services
    (which lock, transition and audit), or never, for audit events. Actions still work."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _snapshot(obj: Any) -> dict[str, Any]:
    """The object's editable fields as JSON values (others as text)."""
    found = {}
    for field in obj._meta.concrete_fields:
        value = getattr(obj, field.attname)
        if not isinstance(value, str | int | float | bool | list | dict | type(None)):
            value = str(value)
        found[field.name] = value
    return found


class AuditedChangesMixin:
    """For a ``ModelAdmin`` of settings that govern runs (risk rules, retention policies):
    every add, change and delete in admin is an event of the ``system`` audit chain, in the
    same transaction: ``admin.<model>.added|changed|deleted`` with the fields that changed
    (``{"field": [old, new]}``) or the deleted object's fields, so approvals cannot be
    switched off without a trace."""

    def _record(self, request: HttpRequest, obj: Any, what: str, payload: dict[str, Any]) -> None:
        name = obj._meta.model_name
        audit_record(
            actor=Actor.for_user(request.user),
            verb=f"admin.{name}.{what}",
            object_type=name,
            object_id=obj.pk,
            payload=payload,
        )

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        before = {}
        if change:
            stored = type(obj).objects.filter(pk=obj.pk).first()
            before = _snapshot(stored) if stored is not None else {}
        with transaction.atomic():
            super().save_model(request, obj, form, change)  # type: ignore[misc]
            after = _snapshot(obj)
            changed = {k: [before.get(k), v] for k, v in after.items() if before.get(k) != v}
            self._record(request, obj, "changed" if change else "added", {"changed": changed})

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        with transaction.atomic():
            self._record(request, obj, "deleted", {"was": _snapshot(obj)})
            super().delete_model(request, obj)  # type: ignore[misc]

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        with transaction.atomic():
            for obj in queryset:
                self._record(request, obj, "deleted", {"was": _snapshot(obj)})
            super().delete_queryset(request, queryset)  # type: ignore[misc]


class ReadOnlyTabularInline(ReadOnlyAdminMixin, admin.TabularInline):
    """A read-only inline listing related rows, each linking to its own admin page."""

    extra = 0
    can_delete = False
    show_change_link = True


# The admin page of each kind of object an event names (by URL name, so this app imports
# none of the apps above it). A link to a deleted object leads to admin's "does not exist".
_OBJECT_ADMIN = {
    "run": "admin:runs_run_change",
    "step": "admin:runs_step_change",
    "approval": "admin:approvals_approvalrequest_change",
    "retention_purge": "admin:runs_retentionpurge_change",
}


@admin.register(AuditEvent)
class AuditEventAdmin(ProjectScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """The append-only audit log: searchable and filterable, never editable. Staff see the
    events of their projects' runs; the system chain is for superusers. Each row links its
    run (the run's page) and its object (a step's, approval request's or run's admin page)."""

    project_permission = "audit.view_auditevent"

    list_display = [
        "id",
        "created_at",
        "verb",
        "actor_kind",
        "actor_name",
        "object_link",
        "from_state",
        "to_state",
        "run_link",
        "project_id",
    ]
    list_filter = ["actor_kind", "object_type", "verb"]
    search_fields = ["verb", "actor_name", "actor_id", "object_id", "run_id"]
    date_hierarchy = "created_at"
    # Newest first, as a log is read; the primary key's index serves it backwards (ids grow
    # with time within a chain, and the model's own ordering stays ``id`` for chain walks).
    ordering = ["-id"]
    show_full_result_count = False
    readonly_fields = ["object_link", "run_link"]
    fieldsets = [
        (None, {"fields": ["created_at", "verb", "object_link", "run_link"]}),
        ("Actor", {"fields": ["actor_kind", "actor_id", "actor_name"]}),
        ("Change", {"fields": ["from_state", "to_state", "payload"]}),
        ("Hash chain", {"fields": ["chain", "prev_hash", "hash"]}),
    ]

    @admin.display(description="object", ordering="object_type")
    def object_link(self, event: AuditEvent) -> str:
        """``type:id``, linked to the object's admin page when it has one."""
        name = _OBJECT_ADMIN.get(event.object_type)
        text = f"{event.object_type}:{event.object_id}"
        try:
            url = reverse(name, args=[event.object_id]) if name else ""
        except NoReverseMatch:
            url = ""
        return format_html('<a href="{}" data-object-link>{}</a>', url, text) if url else text

    @admin.display(description="run", ordering="run_id")
    def run_link(self, event: AuditEvent) -> str:
        """The run's id, linked to the run's page."""
        if event.run_id is None:
            return "—"
        url = reverse("run-detail", args=[event.run_id])
        return format_html('<a href="{}" data-run-link>{}</a>', url, event.run_id)
