"""The task history in Django admin: read only (rows are written by the workers' signals and
deleted by retention)."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from fleet.models import TaskRecord


@admin.register(TaskRecord)
class TaskRecordAdmin(admin.ModelAdmin):
    list_display = ("finished_at", "name", "state", "args_summary", "runtime_ms", "worker")
    list_filter = ("state", "name")
    search_fields = ("task_id", "name", "exception")
    date_hierarchy = "finished_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
