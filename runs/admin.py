"""Admin for runs, sessions, steps, attempts, checkpoints, the tool-call ledger and retention.

All read-only (statuses are FSM-protected and every change must be audited): operators act
through the pages and the API; admins get a "Cancel selected runs" action that calls
``runs.control.lifecycle.run_cancel`` per run. Retention policies and purges have their admin
in ``runs.retention_admin``, registered by importing it here. State schema versions are added
(never changed) through ``runs.control.state_schemas.state_schema_create``.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.html import format_html
from django_fsm import ConcurrentTransition, TransitionNotAllowed

import runs.retention_admin  # noqa: F401 (registers its admins)
from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from audit.admin import ReadOnlyAdminMixin, ReadOnlyTabularInline
from projects.access import Access
from projects.admin import ProjectScopedAdminMixin
from projects.models import Project
from runs.control import lifecycle, settle
from runs.control.state_schemas import state_schema_check, state_schema_create
from runs.models import (
    AgentSession,
    Checkpoint,
    Run,
    StateSchema,
    Step,
    StepAttempt,
    ToolCall,
)
from runs.state_migrations import registered_migrations
from runs.state_serializers import STATE_SCHEMA_FIELDS


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
        (
            None,
            {
                "fields": [
                    "id",
                    "project",
                    "goal",
                    "agent",
                    "status",
                    "requested_by",
                    "session",
                    "forked_from",
                    "forked_from_index",
                    "error",
                ]
            },
        ),
        ("Data", {"fields": ["input", "metadata", "state", "message_count", "context_tokens"]}),
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


class SettleForm(forms.Form):
    """What an operator knows of a call whose outcome is unknown (``step_settle``)."""

    happened = forms.TypedChoiceField(
        label="Did the call take effect?",
        choices=[("yes", "Yes: it happened (the run goes on)"), ("no", "No: call it again")],
        coerce=lambda value: value == "yes",
        widget=forms.RadioSelect,
    )
    result = forms.JSONField(
        label="Its result (JSON, when it happened)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80}),
    )
    reason = forms.CharField(
        label="How you know",
        max_length=lifecycle.MAX_REASON,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 80}),
        help_text="Kept in the step's audit event.",
    )


@admin.register(Step)
class StepAdmin(ProjectScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Steps, read-only, with the one change an operator makes here: settling a call whose
    outcome is unknown (the same service as the run page and the API)."""

    project_permission = "runs.view_step"
    project_field = "run__project_id"
    list_display = ["__str__", "run", "index", "tool", "status", "risk", "attempts", "updated_at"]
    list_filter = ["status", "risk"]
    search_fields = ["tool", "idempotency_key", "run__goal"]
    list_select_related = ["run"]
    inlines = [StepAttemptInline]
    actions = ["settle_selected"]

    def has_settle_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("runs.resume_run")

    @admin.action(
        description="Settle the unknown outcome of the selected steps…", permissions=["settle"]
    )
    def settle_selected(
        self, request: HttpRequest, queryset: QuerySet[Step]
    ) -> TemplateResponse | None:
        """A confirmation page asking whether the calls happened (with a result) and how the
        operator knows; once posted back, ``step_settle`` for each selected step of a project
        where the operator may resume runs (each refusal is a message)."""
        form = SettleForm(request.POST if "apply" in request.POST else None)
        steps = list(queryset.select_related("run").order_by("pk"))
        if not form.is_valid():
            context = {
                **self.admin_site.each_context(request),
                "title": "Settle the unknown outcome of the selected steps?",
                "opts": self.model._meta,
                "steps": steps,
                "form": form,
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            }
            return TemplateResponse(request, "admin/runs/step/settle_selected.html", context)
        actor = Actor.for_user(request.user)
        access = Access(request.user)
        happened = form.cleaned_data["happened"]
        settled = 0
        for step in steps:
            if not access.can("runs.resume_run", step.run.project_id):
                self.message_user(
                    request, f"Step {step.pk}: not in a project you operate", messages.ERROR
                )
                continue
            try:
                settle.step_settle(
                    run_id=step.run_id,
                    step_id=step.pk,
                    actor=actor,
                    happened=happened,
                    result=form.cleaned_data["result"] if happened else None,
                    reason=form.cleaned_data["reason"],
                )
            except (Conflict, InvalidInput, Run.DoesNotExist, Step.DoesNotExist) as exc:
                self.message_user(request, f"Step {step.pk}: not settled ({exc})", messages.ERROR)
            else:
                settled += 1
        if settled:
            self.message_user(request, f"Settled {settled} step(s).", messages.SUCCESS)
        return None


@admin.register(StepAttempt)
class StepAttemptAdmin(ProjectScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    project_permission = "runs.view_step"
    project_field = "step__run__project_id"
    list_display = ["__str__", "status", "worker", "started_at", "duration_ms"]
    list_filter = ["status"]
    search_fields = ["worker", "step__tool"]
    list_select_related = ["step"]


class SessionRunInline(ReadOnlyTabularInline):
    model = Run
    fk_name = "session"
    fields = readonly_fields = ("goal", "status", "agent", "message_count", "created_at")
    ordering = ["created_at"]
    show_change_link = True


@admin.register(AgentSession)
class AgentSessionAdmin(ProjectScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Sessions, read-only: they change through the API (``runs.control.sessions``), every
    change audited in the session's chain; the page (``/sessions/<id>/``) shows them live."""

    project_permission = "runs.view_run"
    list_display = [
        "external_id",
        "project",
        "subject",
        "status",
        "message_count",
        "context_tokens",
        "created_at",
    ]
    list_filter = ["project", "status"]
    search_fields = ["external_id", "subject"]
    list_select_related = ["project"]
    date_hierarchy = "created_at"
    inlines = [SessionRunInline]
    readonly_fields = ["page_link"]
    fields = [
        "page_link",
        "id",
        "project",
        "external_id",
        "subject",
        "metadata",
        "status",
        "message_count",
        "context_tokens",
        "creator_kind",
        "creator_name",
        "created_at",
        "updated_at",
        "closed_at",
    ]

    @admin.display(description="page")
    def page_link(self, session: AgentSession) -> str:
        return format_html('<a href="{}">Open its page</a>', session.get_absolute_url())


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


class StateSchemaForm(forms.ModelForm):
    """A new state schema version: the project among those where the user may register
    schemas, and a migration function chosen from the registered ones
    (``runs.state_migrations.registered_migrations``), never a typed import path. The
    version is the next one; ``state_schema_check`` decides, its errors shown on their
    fields."""

    migration_function = forms.ChoiceField(required=False)
    migration_steps = forms.JSONField(
        required=False,
        help_text='Declarative steps, e.g. [{"op": "rename", "from": "/a", "to": "/b"}] '
        "(empty: none; [] : states carry over unchanged).",
    )

    class Meta:
        model = StateSchema
        fields = [
            "project",
            "name",
            "description",
            "schema",
            "migration_function",
            "migration_steps",
        ]

    def __init__(self, *args: Any, access: Access, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["project"].queryset = Project.objects.filter(  # type: ignore[attr-defined]
            pk__in=[p.pk for p in access.projects("runs.add_stateschema")]
        )
        choices = [("", "none (declarative steps, or version 1)")]
        self.fields["migration_function"].choices = choices + [  # type: ignore[attr-defined]
            (path, path) for path in registered_migrations()
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        project, name = data.get("project"), data.get("name")
        if project is None or not name:
            return data
        latest = StateSchema.objects.filter(project=project, name=name).order_by("-version")
        data["version"] = (latest.values_list("version", flat=True).first() or 0) + 1
        try:
            state_schema_check(
                project=project,
                name=name,
                version=data["version"],
                schema=data.get("schema"),
                migration_function=data.get("migration_function") or "",
                migration_steps=data.get("migration_steps"),
            )
        except InvalidInput as exc:
            field = exc.field if exc.field in self.fields else None
            self.add_error(field, exc.message)
        return data


@admin.register(StateSchema)
class StateSchemaAdmin(ProjectScopedAdminMixin, admin.ModelAdmin):
    """State schema versions of the projects the user may see; superusers and project admins
    add the next version of a schema (``state_schema_create``, audited). Versions are never
    changed or deleted: stored states name them."""

    project_permission = "runs.view_run"
    list_display = ["name", "version", "project", "migration_function", "created_by_name"]
    list_filter = ["project", "name"]
    readonly_fields = ["version", "created_by_name", "created_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return Access(request.user).anywhere("runs.add_stateschema")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        if obj is not None:
            return super().get_form(request, obj, change, **kwargs)
        access = Access(request.user)

        class Form(StateSchemaForm):
            def __init__(self, *args: Any, **form_kwargs: Any) -> None:
                super().__init__(*args, access=access, **form_kwargs)

        return Form

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return StateSchemaForm.Meta.fields
        return STATE_SCHEMA_FIELDS

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        data = form.cleaned_data
        created = state_schema_create(
            actor=Actor.for_user(request.user),
            project=data["project"],
            name=data["name"],
            version=data["version"],
            schema=data["schema"],
            migration_function=data.get("migration_function") or "",
            migration_steps=data.get("migration_steps"),
            description=data.get("description") or "",
        )
        obj.pk = created.pk
