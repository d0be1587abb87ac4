"""Admin of upstream MCP servers: register, see their tools with schemas and annotations,
refresh the tool lists."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from audit.admin import AuditedChangesMixin
from gateway.models import McpSession, Upstream
from gateway.services import upstream_as_json, upstream_refresh_tools
from gateway.upstream import UpstreamUnavailable
from runs.policy_admin import OwnedPolicyAdminMixin


@admin.register(Upstream)
class UpstreamAdmin(OwnedPolicyAdminMixin, AuditedChangesMixin, admin.ModelAdmin):
    """Upstream servers; every add, change and delete is an event of the system audit chain,
    and of the audit chain of the project it belongs (or belonged) to, as a change of that
    project's policy (``runs.policy_admin.OwnedPolicyAdminMixin``)."""

    policy_kind = "mcp_upstream"
    policy_json = staticmethod(upstream_as_json)
    list_display = ["name", "project", "transport", "enabled", "tool_count", "tools_fetched_at"]
    list_filter = ["project", "transport", "enabled"]
    search_fields = ["name", "command", "url"]
    readonly_fields = ["tool_table", "tools_fetched_at", "created_at"]
    actions = ["refresh_tools"]

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "url":
            kwargs["assume_scheme"] = "https"  # Django 6's default, taken now
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    @admin.display(description="tools")
    def tool_count(self, upstream: Upstream) -> int:
        return len(upstream.tools)

    @admin.display(description="tools (last fetched)")
    def tool_table(self, upstream: Upstream) -> str:
        rows = format_html_join(
            "",
            "<tr><td><code>{}</code></td><td>{}</td><td><pre>{}</pre></td><td><pre>{}</pre>"
            "</td></tr>",
            (
                (
                    tool.get("name", ""),
                    tool.get("description", ""),
                    json.dumps(tool.get("annotations") or {}, indent=1),
                    json.dumps(tool.get("inputSchema") or {}, indent=1),
                )
                for tool in upstream.tools
            ),
        )
        return format_html(
            "<table><tr><th>name</th><th>description</th><th>annotations</th><th>input schema"
            "</th></tr>{}</table>",
            rows,
        )

    @admin.action(description="Fetch the tool lists again")
    def refresh_tools(self, request: HttpRequest, queryset: Any) -> None:
        """Fetch each selected upstream's tools now."""
        for upstream in queryset:
            try:
                tools = upstream_refresh_tools(upstream)
            except UpstreamUnavailable as exc:
                self.message_user(request, f"{upstream}: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"{upstream}: {len(tools)} tools", messages.SUCCESS)


@admin.register(McpSession)
class McpSessionAdmin(admin.ModelAdmin):
    """MCP sessions and their runs, for superusers only: a session id is of use to its owner
    alone (``gateway.calls``), so no other staff user sees one, whatever model permissions
    they hold."""

    list_display = ["session_id", "upstream", "run", "created_at"]
    list_filter = ["upstream"]
    readonly_fields = ["session_id", "upstream", "run", "created_at"]

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_superuser

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Django opens the list and the page to whoever may change, not only view.
        return request.user.is_superuser

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
