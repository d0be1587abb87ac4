"""Admin of projects, memberships and API tokens (superusers only).

Tokens are listed by their first characters, never in full: only the digest is stored. A
token is created here with its text shown once, in the confirmation message.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils import timezone

from agentops.errors import InvalidInput
from agentops.grants import parse_grant
from projects.access import Access
from projects.models import ApiToken, Membership, Project
from projects.services import token_create, token_rotate


class SuperuserOnly:
    """Only superusers see and change these models: they decide who belongs where."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return self.has_module_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(SuperuserOnly, admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(SuperuserOnly, admin.ModelAdmin):
    list_display = ["user", "project", "role"]
    list_filter = ["project", "role"]
    search_fields = ["user__username", "project__slug"]
    autocomplete_fields = ["user", "project"]


class ApiTokenForm(forms.ModelForm):
    """A new token: its user must be a member of its project (superusers excepted); its
    grant, if any, must be one ``agentops.grants.parse_grant`` accepts."""

    class Meta:
        model = ApiToken
        fields = ["user", "project", "name", "expiry", "grant"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        user, project = data.get("user"), data.get("project")
        outsider = (
            user is not None
            and project is not None
            and not user.is_superuser
            and not Membership.objects.filter(user=user, project=project).exists()
        )
        if outsider:
            raise forms.ValidationError(f"{user} is not a member of project {project}.")
        expiry = data.get("expiry")
        if expiry is not None and expiry <= timezone.now():
            raise forms.ValidationError({"expiry": "The expiry must be in the future."})
        try:
            data["grant"] = parse_grant(data.get("grant"))
        except InvalidInput as exc:
            raise forms.ValidationError({"grant": exc.message}) from None
        return data


@admin.register(ApiToken)
class ApiTokenAdmin(SuperuserOnly, admin.ModelAdmin):
    """Revoke by deleting; add creates a token and shows its text once; "Rotate" replaces
    tokens by new ones (shown once) that work at once while the old ones stop."""

    form = ApiTokenForm
    actions = ["rotate_selected"]
    list_display = ["token_key", "name", "user", "project", "created", "expiry"]
    list_filter = ["project"]
    search_fields = ["user__username", "name", "token_key"]
    autocomplete_fields = ["user", "project"]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> list[str]:
        return ["user", "project", "expiry", "grant"] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        ttl = None
        if obj.expiry is not None:
            ttl = max(1, int((obj.expiry - timezone.now()).total_seconds()))
        token, text = token_create(
            user=obj.user, project=obj.project, name=obj.name, ttl_seconds=ttl, grant=obj.grant
        )
        obj.pk = token.pk
        obj.digest, obj.token_key, obj.created = token.digest, token.token_key, token.created
        messages.warning(
            request, f"The token is {text} (copy it now: it is not stored and not shown again)."
        )

    @admin.action(description="Rotate selected tokens")
    def rotate_selected(self, request: HttpRequest, queryset: Any) -> None:
        """Replace each selected token (``projects.services.token_rotate``)."""
        for token in queryset.select_related("user", "project"):
            new, text = token_rotate(token=token)
            messages.warning(
                request,
                f"{new.name or 'token'} of {new.user} in {new.project}: the new token is {text} "
                "(copy it now: it is not stored and not shown again; the old one no longer works).",
            )


class ProjectScopedAdminMixin:
    """For the admin of objects that belong to a project: a staff user who is not a superuser
    lists and opens only the objects of projects where their role grants
    ``project_permission``; ``project_field`` is the lookup of the object's project id."""

    project_field = "project_id"
    project_permission = ""

    def get_queryset(self, request: HttpRequest) -> Any:
        queryset = super().get_queryset(request)  # type: ignore[misc]
        return Access(request.user).scope(queryset, self.project_permission, self.project_field)
