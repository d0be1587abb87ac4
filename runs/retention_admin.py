"""Admin of retention: policies (the one editable model of ``runs.admin``), each with a
preview page (what it would delete or redact now) and "Run now", which starts a retention
purge (``runs.purges``) in a Celery task; purges are listed with their progress and history.
Imported by ``runs.admin``, which registers them."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from audit.admin import AuditedChangesMixin, ReadOnlyAdminMixin
from runs import purges, tasks
from runs.models import (
    PURGE_OPEN,
    RetentionPolicy,
    RetentionPurge,
)
from runs.policy_admin import OwnedPolicyAdminMixin
from runs.retention import retention_policy_as_json, retention_preview
from runs.statuses import RUN_STATUSES


class RetentionPolicyForm(forms.ModelForm):
    """A retention policy, its ``statuses`` chosen with a checkbox per terminal run status
    (the only ones that may expire); none or another status is refused with a message."""

    statuses = forms.MultipleChoiceField(
        choices=[(value, info.label) for value, info in RUN_STATUSES.items() if info.terminal],
        # A new policy starts with the model's default: every terminal status.
        initial=RetentionPolicy._meta.get_field("statuses").get_default,
        widget=forms.CheckboxSelectMultiple,
        help_text="Finished runs in any of the checked statuses expire after the TTL.",
    )

    class Meta:
        model = RetentionPolicy
        fields = ["name", "project", "enabled", "statuses", "agent", "ttl_days", "action"]


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(OwnedPolicyAdminMixin, AuditedChangesMixin, admin.ModelAdmin):
    """Retention policies, applied hourly by Celery beat and by ``manage.py purge_retention``;
    ``<id>/preview/`` shows what one would do now and runs it ("Run now", POST). A change of
    a project's policy is also recorded in that project's audit chain
    (``runs.policy_admin.OwnedPolicyAdminMixin``)."""

    policy_kind = "retention_policy"
    policy_json = staticmethod(retention_policy_as_json)
    form = RetentionPolicyForm
    list_display = [
        "name",
        "project",
        "enabled",
        "action",
        "ttl_days",
        "agent",
        "statuses",
        "preview_link",
    ]
    list_filter = ["project", "enabled", "action"]
    change_form_template = "admin/runs/retentionpolicy/change_form.html"

    @admin.display(description="preview")
    def preview_link(self, policy: RetentionPolicy) -> str:
        url = reverse("admin:runs_retentionpolicy_preview", args=[policy.pk])
        return format_html('<a href="{}" data-preview-link>Preview / run now</a>', url)

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(self.preview_view)
        return [
            path("<int:policy_id>/preview/", view, name="runs_retentionpolicy_preview"),
            *super().get_urls(),
        ]

    def preview_view(self, request: HttpRequest, policy_id: int) -> HttpResponse:
        """GET: what the policy would delete or redact now, the open purge and this
        policy's last purges. POST: start a purge of it (change permission needed) and
        show that purge's progress."""
        policy = RetentionPolicy.objects.filter(pk=policy_id).first()
        if policy is None:
            raise Http404("no such retention policy")
        if not self.has_view_permission(request, policy):
            raise PermissionDenied
        here = reverse("admin:runs_retentionpolicy_preview", args=[policy.pk])
        if request.method == "POST":
            if not self.has_change_permission(request, policy):
                raise PermissionDenied
            try:
                purge = purges.purge_start(actor=Actor.for_user(request.user), policy_id=policy.pk)
            except (Conflict, InvalidInput) as exc:
                self.message_user(request, f"Not started: {exc}.", messages.ERROR)
                return redirect(here)
            transaction.on_commit(lambda: tasks.retention_purge_execute.delay(purge.pk))
            self.message_user(request, f"Purge {purge.pk} started.", messages.SUCCESS)
            return redirect(reverse("admin:runs_retentionpurge_change", args=[purge.pk]))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Retention preview: {policy.name}",
            "policy": policy,
            "preview": retention_preview(policy=policy),
            "open_purge": RetentionPurge.objects.filter(status__in=PURGE_OPEN).first(),
            "purges": RetentionPurge.objects.filter(policy=policy)[:10],
            "can_run": self.has_change_permission(request, policy),
        }
        return TemplateResponse(request, "admin/runs/retentionpolicy/preview.html", context)


@admin.register(RetentionPurge)
class RetentionPurgeAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The history of retention purges (who, when, which policy, counts, duration); an open
    purge's page refreshes itself every 2 seconds until it ends."""

    list_display = [
        "id",
        "policy_shown",
        "status",
        "started_by_name",
        "created_at",
        "duration",
        "runs",
        "steps",
        "redacted_runs",
        "audit_events",
    ]
    list_filter = ["status"]
    search_fields = ["policy_name", "started_by_name"]
    change_form_template = "admin/runs/retentionpurge/change_form.html"
    fields = readonly_fields = (
        "policy_shown",
        "status",
        "started_by_name",
        "created_at",
        "started_at",
        "finished_at",
        "duration",
        "runs",
        "steps",
        "redacted_runs",
        "audit_events",
        "batches",
        "error",
    )

    @admin.display(description="policy", ordering="policy_name")
    def policy_shown(self, purge: RetentionPurge) -> str:
        return purge.policy_name or "every enabled policy, then audit chains"

    @admin.display(description="duration")
    def duration(self, purge: RetentionPurge) -> str:
        ms = purge.duration_ms
        return "—" if ms is None else f"{ms / 1000:.2f} s"
