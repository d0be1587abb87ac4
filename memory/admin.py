"""Admin of the memory store: items and their history read-only and scoped to the staff
user's projects (writes go through the API, tools and pages, which audit them); retention
policies editable, every change audited."""

from __future__ import annotations

from django.contrib import admin

from audit.admin import AuditedChangesMixin, ReadOnlyAdminMixin
from memory.models import MemoryItem, MemoryRetentionPolicy, MemoryVersion
from projects.admin import ProjectScopedAdminMixin


@admin.register(MemoryItem)
class MemoryItemAdmin(ProjectScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    project_permission = "memory.view_memoryitem"
    list_display = ["namespace_path", "key", "project", "version", "updated_at", "expires_at"]
    list_filter = ["project"]
    search_fields = ["namespace_path", "key"]
    list_select_related = ["project"]
    exclude = ["search_vector"]
    show_full_result_count = False


@admin.register(MemoryVersion)
class MemoryVersionAdmin(ProjectScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    project_permission = "memory.view_memoryitem"
    list_display = ["namespace_path", "key", "version", "operation", "actor_name", "created_at"]
    list_filter = ["operation", "project"]
    search_fields = ["namespace_path", "key", "=item_id"]
    show_full_result_count = False


@admin.register(MemoryRetentionPolicy)
class MemoryRetentionPolicyAdmin(AuditedChangesMixin, admin.ModelAdmin):
    """Memory retention policies, applied by Celery beat (``memory.purge``)."""

    list_display = ["name", "enabled", "project", "namespace_prefix", "max_age_days"]
    list_editable = ["enabled"]
