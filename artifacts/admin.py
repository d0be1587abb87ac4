"""Django admin of artifacts: their descriptions (read-only: uploads and deletions go through
the API, audited) and each project's size limit."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from artifacts.models import Artifact, ArtifactLimit


@admin.register(Artifact)
class ArtifactAdmin(admin.ModelAdmin):
    """Artifacts, read-only, for superusers."""

    list_display = ["name", "run", "sniffed_type", "size", "created_at"]
    list_filter = ["kind", "project"]
    search_fields = ["name", "sha256"]
    readonly_fields = [field.name for field in Artifact._meta.fields]

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Every project's files: superusers only (the run pages show each project its own).
        return bool(request.user.is_superuser)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ArtifactLimit)
class ArtifactLimitAdmin(admin.ModelAdmin):
    """The largest artifact a project accepts (bytes), where it differs from the setting."""

    list_display = ["project", "max_bytes"]
