"""Admin for runs, steps, attempts, checkpoints and the tool-call ledger.

All read-only (statuses are FSM-protected and every change must be audited): operators act
through the pages and the API; admins get a "Cancel selected runs" action that calls
``runs.control.lifecycle.run_cancel`` per run. Retention policies are the one editable model here.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django_fsm import ConcurrentTransition, TransitionNotAllowed

from agentops.actors import Actor
from audit.admin import AuditedChangesMixin, ReadOnlyAdminMixin, ReadOnlyTabularInline
from projects.access import Access
from projects.admin import ProjectScopedAdminMixin
from runs.control import lifecycle
from runs.models import Checkpoint, RetentionPolicy, Run, Step, StepAttempt, ToolCall


class StepInline(ReadOnlyTabularInline):
    model = Step
    fields = readonly_fields = (
        "index",
        "tool",
        "status",
        "risk",
        "attempts",
        "max_attempts",
        "finished_at",
    )
    ordering = ["index"]


class StepAttemptInline(ReadOnlyTabularInline):
    model = StepAttempt
    fields = readonly_fields = ("number", "status", "worker", "started_at", "duration_ms", "error")
    ordering = ["number"]


@admin.register(Run)
class RunAdmin(ProjectScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    project_permission = "runs.view_run"
    list_display = [
        "goal_short",
        "project",
        "status",
        "agent",
        "requested_by",
        "created_at",
        "updated_at",
    ]
    list_filter = ["project", "status", "agent"]
    search_fields = ["goal", "requested_by__username"]
    list_select_related = ["project", "requested_by"]
    date_hierarchy = "created_at"
    inlines = [StepInline]
    actions = ["cancel_selected"]
    fieldsets = [
        (None, {"fields": ["id", "project", "goal", "agent", "status", "requested_by", "error"]}),
        ("Data", {"fields": ["input", "metadata", "state", "conversation"]}),
        ("Limits", {"fields": ["step_limit", "deadline", "client_done", "version"]}),
        ("Usage", {"fields": ["usage_tokens", "cost_usd", "duration_ms"]}),
        ("Times", {"fields": ["created_at", "updated_at", "started_at", "finished_at"]}),
    ]

    @admin.display(description="goal", ordering="goal")
    def goal_short(self, run: Run) -> str:
        return run.goal[:80]

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("runs.cancel_run")

    @admin.action(description="Cancel selected runs", permissions=["cancel"])
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        """Cancel each selected run of a project where the user may cancel runs."""
        actor = Actor.for_user(request.user)
        cancelled = 0
        allowed = Access(request.user).scope(queryset, "runs.cancel_run")
        for run_id in allowed.values_list("pk", flat=True):
            try:
                lifecycle.run_cancel(run_id=run_id, actor=actor, reason="cancelled in admin")
            except (TransitionNotAllowed, ConcurrentTransition, Run.DoesNotExist) as exc:
                self.message_user(request, f"Run {run_id}: not cancelled ({exc})", messages.ERROR)
            else:
                cancelled += 1
        if cancelled:
            self.message_user(request, f"Cancelled {cancelled} run(s).", messages.SUCCESS)


@admin.register(Step)
class StepAdmin(ProjectScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    project_permission = "runs.view_step"
    project_field = "run__project_id"
    list_display = ["__str__", "run", "index", "tool", "status", "risk", "attempts", "updated_at"]
    list_filter = ["status", "risk"]
    search_fields = ["tool", "idempotency_key", "run__goal"]
    list_select_related = ["run"]
    inlines = [StepAttemptInline]


@admin.register(StepAttempt)
class StepAttemptAdmin(ProjectScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    project_permission = "runs.view_step"
    project_field = "step__run__project_id"
    list_display = ["__str__", "status", "worker", "started_at", "duration_ms"]
    list_filter = ["status"]
    search_fields = ["worker", "step__tool"]
    list_select_related = ["step"]


@admin.register(Checkpoint)
class CheckpointAdmin(ProjectScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    project_permission = "runs.view_step"
    project_field = "run__project_id"
    list_display = ["__str__", "run", "index", "created_at"]
    list_select_related = ["run"]
    search_fields = ["run__goal"]


@admin.register(ToolCall)
class ToolCallAdmin(ProjectScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    project_permission = "runs.view_step"
    project_field = "run__project_id"
    list_display = ["idempotency_key", "tool", "status", "attempt", "duration_ms", "started_at"]
    list_filter = ["status", "tool"]
    search_fields = ["idempotency_key", "tool"]


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(AuditedChangesMixin, admin.ModelAdmin):
    """Retention policies, applied hourly by Celery beat and by ``manage.py purge_retention``."""

    list_display = ["name", "enabled", "action", "ttl_days", "agent", "statuses"]
    list_filter = ["enabled", "action"]
