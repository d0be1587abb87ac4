"""Admin for the audit log (read-only), and the read-only base used by the other apps' admins."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from audit.models import AuditEvent


class ReadOnlyAdminMixin:
    """Shows rows without add, change or delete: the model changes only through its services
    (which lock, transition and audit), or never, for audit events. Actions still work."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyTabularInline(ReadOnlyAdminMixin, admin.TabularInline):
    """A read-only inline listing related rows, each linking to its own admin page."""

    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The append-only audit log: searchable and filterable, never editable."""

    list_display = [
        "id",
        "created_at",
        "verb",
        "actor_kind",
        "actor_name",
        "object_type",
        "object_id",
        "from_state",
        "to_state",
        "run_id",
    ]
    list_filter = ["actor_kind", "object_type", "verb"]
    search_fields = ["verb", "actor_name", "actor_id", "object_id", "run_id"]
    date_hierarchy = "created_at"
    show_full_result_count = False
    fieldsets = [
        (None, {"fields": ["created_at", "verb", "object_type", "object_id", "run_id"]}),
        ("Actor", {"fields": ["actor_kind", "actor_id", "actor_name"]}),
        ("Change", {"fields": ["from_state", "to_state", "payload"]}),
        ("Hash chain", {"fields": ["chain", "prev_hash", "hash"]}),
    ]
