"""Admin of evals: case sets, cases and eval runs read-only and scoped to the staff user's
projects (they are made through the API, pages and ``run_eval``, which audit them)."""

from __future__ import annotations

from django.contrib import admin

from audit.admin import ReadOnlyAdminMixin
from evals.models import Case, CaseSet, EvalResult, EvalRun
from projects.admin import ProjectScopedAdminMixin


@admin.register(CaseSet)
class CaseSetAdmin(ProjectScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    project_permission = "evals.view_caseset"
    list_display = ["name", "project", "version", "created_at"]
    list_filter = ["project"]
    search_fields = ["name"]


@admin.register(Case)
class CaseAdmin(ProjectScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    project_permission = "evals.view_caseset"
    project_field = "case_set__project_id"
    list_display = ["name", "case_set", "source", "added_in", "removed_in"]
    list_filter = ["source"]
    search_fields = ["name", "=source_run_id"]


@admin.register(EvalRun)
class EvalRunAdmin(ProjectScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    project_permission = "evals.view_caseset"
    project_field = "case_set__project_id"
    list_display = [
        "agent_version",
        "case_set",
        "case_set_version",
        "passed",
        "total",
        "created_at",
    ]
    search_fields = ["agent_version"]


@admin.register(EvalResult)
class EvalResultAdmin(ProjectScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    project_permission = "evals.view_caseset"
    project_field = "eval_run__case_set__project_id"
    list_display = ["eval_run", "case", "passed", "reason"]
    list_filter = ["passed"]
