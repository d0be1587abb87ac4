"""Admin for risk rules and group webhooks (editable), and approval requests, decisions and
notifications (read-only).

Approval requests are decided through ``approvals.services.approval_decide`` only, which the
"Approve selected" / "Reject selected" actions call once per request with the admin user as
the reviewer, so the usual rules apply (not your own run, one decision per reviewer). Both
actions first show a confirmation page listing the requests, which needs a comment: it is
recorded in each decision.
"""

from __future__ import annotations

from typing import Any

import apprise
from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from approvals import rules, services
from approvals.models import (
    ApprovalDecision,
    ApprovalRequest,
    Decision,
    GroupWebhooks,
    Notification,
    NotificationChannel,
    RiskRule,
    webhook_list,
)
from approvals.policy import DECIDE_PERMISSION
from approvals.services import MAX_COMMENT
from audit.admin import AuditedChangesMixin, ReadOnlyAdminMixin, ReadOnlyTabularInline
from projects.access import Access
from projects.admin import ProjectScopedAdminMixin
from projects.models import Project


def masked(url: str) -> str:
    """A webhook URL as admin shows it: apprise's privacy form, secrets hidden."""
    service = apprise.Apprise.instantiate(url)
    return service.url(privacy=True) if service is not None else "(not a webhook URL)"


def _masked_lines(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    return "\n".join(masked(url) for url in webhook_list(text))


class WebhooksAuditedMixin(AuditedChangesMixin):
    """Audits admin changes as ``AuditedChangesMixin`` does, with the ``webhook_urls`` in the
    audit log in apprise's privacy form: their tokens are secrets."""

    def _record(self, request: HttpRequest, obj: Any, what: str, payload: dict[str, Any]) -> None:
        changed = payload.get("changed", {})
        if "webhook_urls" in changed:
            changed["webhook_urls"] = [_masked_lines(text) for text in changed["webhook_urls"]]
        was = payload.get("was", {})
        if "webhook_urls" in was:
            was["webhook_urls"] = _masked_lines(was["webhook_urls"])
        super()._record(request, obj, what, payload)


@admin.register(RiskRule)
class RiskRuleAdmin(ProjectScopedAdminMixin, WebhooksAuditedMixin, admin.ModelAdmin):
    """Risk rules with their conditions and approval policies. A condition or policy that
    cannot work is refused with a form error on its field (``RiskRule.clean`` and the
    fields' validators); a rule saved later never changes steps already created.

    A project's admins see, add, change and delete their project's own rules only
    (``approvals.rules``: each change audited in the project's chain, a new policy
    version); the global defaults (no project) are the superusers', audited in the system
    chain."""

    project_permission = "approvals.change_riskrule"
    list_display = [
        "project",
        "pattern",
        "condition",
        "risk",
        "required_approvals",
        "approvers",
        "ttl_seconds",
        "on_expiry",
        "priority",
        "enabled",
        "description",
    ]
    list_editable = ["enabled"]
    list_filter = ["project", "risk", "enabled", "on_expiry"]
    search_fields = ["pattern", "condition", "description"]
    ordering = ["priority", "pattern"]
    list_select_related = ["approvers", "project"]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "project",
                    "description",
                    "pattern",
                    "condition",
                    "risk",
                    "priority",
                    "enabled",
                    "applies_to_read_only",
                ]
            },
        ),
        (
            "Approval policy",
            {
                "fields": [
                    "required_approvals",
                    "approvers",
                    "ttl_seconds",
                    "remind_after_seconds",
                    "escalate_after_seconds",
                    "escalation_group",
                    "on_expiry",
                    "webhook_urls",
                ]
            },
        ),
        ("Validators of the results", {"fields": ["validators"]}),
    ]

    def _may(self, request: HttpRequest, obj: RiskRule | None) -> bool:
        """Whether the user may act on ``obj`` (None: on some rule): a global rule is the
        superusers', a project's rule its admins'."""
        access = Access(request.user)
        if obj is None:
            return access.anywhere(self.project_permission)
        return access.can(self.project_permission, obj.project_id)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._may(request, None)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self._may(request, None)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        """The project field offers the projects the user administers; only superusers may
        leave it empty (a global rule)."""
        field = super().formfield_for_foreignkey(db_field, request, **kwargs)
        if field is not None and db_field.name == "project" and not request.user.is_superuser:
            field.queryset = Project.objects.filter(
                pk__in=Access(request.user).project_ids(self.project_permission) or []
            )
            field.required = True
        return field

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        was = RiskRule.objects.filter(pk=obj.pk).values_list("project_id", flat=True).first()
        if obj.project_id is None and was is None:
            super().save_model(request, obj, form, change)
            return
        rules.risk_rule_save(actor=Actor.for_user(request.user), rule=obj)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        if obj.project_id is None:
            super().delete_model(request, obj)
            return
        rules.risk_rule_delete(actor=Actor.for_user(request.user), rule=obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for obj in queryset:
            self.delete_model(request, obj)


@admin.register(GroupWebhooks)
class GroupWebhooksAdmin(WebhooksAuditedMixin, admin.ModelAdmin):
    """The webhooks a group of approvers is notified at (apprise URLs, one a line)."""

    list_display = ["group", "webhooks"]
    list_select_related = ["group"]

    @admin.display(description="webhooks")
    def webhooks(self, row: GroupWebhooks) -> str:
        return ", ".join(masked(url) for url in webhook_list(row.webhook_urls))


@admin.register(Notification)
class NotificationAdmin(ProjectScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Every notification about approval requests, with its delivery: status, attempts,
    last error, when it was sent. Webhook URLs are shown with their secrets hidden."""

    project_permission = "approvals.view_approvalrequest"
    project_field = "approval__run__project_id"
    list_display = [
        "id",
        "approval",
        "event",
        "channel",
        "to",
        "status",
        "attempts",
        "last_error",
        "created_at",
        "sent_at",
    ]
    list_filter = ["status", "event", "channel"]
    search_fields = ["recipient_name", "subject"]
    list_select_related = ["approval"]
    fields = readonly_fields = (
        "approval",
        "event",
        "channel",
        "recipient_name",
        "to",
        "subject",
        "body",
        "status",
        "attempts",
        "last_error",
        "next_attempt_at",
        "created_at",
        "sent_at",
    )

    @admin.display(description="to")
    def to(self, notification: Notification) -> str:
        if notification.channel == NotificationChannel.WEBHOOK:
            return masked(notification.target)
        return f"{notification.recipient_name} <{notification.target}>"


class DecideSelectedForm(forms.Form):
    """The comment a bulk decision needs: recorded in each request's decision."""

    comment = forms.CharField(
        label="Comment",
        max_length=MAX_COMMENT,
        strip=True,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 80}),
        help_text="Why you decide these requests so (kept with each decision and the audit log).",
    )


class ApprovalDecisionInline(ReadOnlyTabularInline):
    model = ApprovalDecision
    fields = readonly_fields = ("reviewer_name", "decision", "comment", "created_at")


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ProjectScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    project_permission = "approvals.view_approvalrequest"
    project_field = "run__project_id"
    list_display = [
        "id",
        "tool",
        "risk",
        "status",
        "required_approvals",
        "run",
        "created_at",
        "expires_at",
    ]
    list_filter = ["status", "risk"]
    search_fields = ["step__tool", "run__goal"]
    list_select_related = ["step", "run"]
    inlines = [ApprovalDecisionInline]
    actions = ["approve_selected", "reject_selected"]

    @admin.display(description="tool", ordering="step__tool")
    def tool(self, approval: ApprovalRequest) -> str:
        return approval.step.tool

    def has_decide_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(DECIDE_PERMISSION)

    def _decide(
        self, request: HttpRequest, queryset: QuerySet, decision: str
    ) -> TemplateResponse | None:
        """The confirmation page of a bulk decision, or, once it was posted back with a
        comment (``apply``), the decision of each selected request with that comment."""
        form = DecideSelectedForm(request.POST if "apply" in request.POST else None)
        if not form.is_valid():
            verb = "approve" if decision == Decision.APPROVE else "reject"
            context = {
                **self.admin_site.each_context(request),
                "title": f"{verb.capitalize()} the selected approval requests?",
                "opts": self.model._meta,
                "approvals": list(queryset.select_related("step", "run").order_by("pk")),
                "form": form,
                "verb": verb,
                "action": f"{verb}_selected",
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            }
            return TemplateResponse(
                request, "admin/approvals/approvalrequest/decide_selected.html", context
            )
        comment = form.cleaned_data["comment"]
        actor = Actor.for_user(request.user)
        done = 0
        for approval_id in queryset.values_list("pk", flat=True):
            try:
                services.approval_decide(
                    approval_id=approval_id, actor=actor, decision=decision, comment=comment
                )
            except (
                Conflict,
                PermissionDenied,
                InvalidInput,
                ApprovalRequest.DoesNotExist,
            ) as exc:
                self.message_user(request, f"Request {approval_id}: {exc}", messages.ERROR)
            else:
                done += 1
        if done:
            self.message_user(
                request, f"Recorded {decision} on {done} request(s).", messages.SUCCESS
            )
        return None

    @admin.action(description="Approve selected requests…", permissions=["decide"])
    def approve_selected(self, request: HttpRequest, queryset: QuerySet) -> TemplateResponse | None:
        return self._decide(request, queryset, Decision.APPROVE)

    @admin.action(description="Reject selected requests…", permissions=["decide"])
    def reject_selected(self, request: HttpRequest, queryset: QuerySet) -> TemplateResponse | None:
        return self._decide(request, queryset, Decision.REJECT)


@admin.register(ApprovalDecision)
class ApprovalDecisionAdmin(ProjectScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    project_permission = "approvals.view_approvalrequest"
    project_field = "approval__run__project_id"
    list_display = ["approval", "reviewer_name", "decision", "created_at"]
    list_filter = ["decision"]
    search_fields = ["reviewer_name", "comment"]
    list_select_related = ["approval"]
