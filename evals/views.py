"""Evals pages: the case sets of the user's projects, a case set (its cases and eval runs),
"Make a case" from a run's step, an eval run's results table (pass rate, expected vs made per
case) and the comparison of two eval runs of one case set (fixed and regressed cases).

Per project, as every page: objects of a project the user may not see are a 404. Bad input
is said on the page (a message), never a 500.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, time
from typing import Any, Final

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.dateparse import parse_date
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agentops.actors import Actor
from agentops.errors import InvalidInput
from evals import from_runs, services
from evals.models import CaseSet, EvalRun
from evals.selectors import cases_at, eval_runs_compared, expected_calls
from projects.access import Access
from projects.views import object_permission
from runs.models import Run, Step
from runs.statuses import RunStatus

VIEW: Final = "evals.view_caseset"
CHANGE: Final = "evals.change_caseset"


def _case_set_project(pk: int) -> int | None:
    return CaseSet.objects.filter(pk=pk).values_list("project_id", flat=True).first()


def _eval_run_project(pk: int) -> int | None:
    found = EvalRun.objects.filter(pk=pk).values_list("case_set__project_id", flat=True).first()
    return int(found) if found is not None else None


def _run_project(run_id: uuid.UUID) -> int | None:
    return Run.objects.filter(pk=run_id).values_list("project_id", flat=True).first()


def _shown(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False, default=str)


@require_http_methods(["GET", "POST"])
@login_required
@permission_required(VIEW, raise_exception=True)
def case_set_list(request: HttpRequest) -> HttpResponse:
    """The case sets of the projects where the user may see them; a POST creates one (name,
    project slug) in a project where the user may make cases."""
    access = Access(request.user)
    if request.method == "POST":
        project = next(
            (p for p in access.projects(CHANGE) if p.slug == request.POST.get("project")), None
        )
        try:
            if project is None:
                raise InvalidInput("choose a project where you may make cases", field="project")
            case_set = services.case_set_create(
                project_id=project.pk,
                name=request.POST.get("name", ""),
                actor=Actor.for_user(request.user),
            )
        except InvalidInput as exc:
            messages.error(request, exc.message)
        else:
            return redirect("eval-case-set", case_set.pk)
    found = access.scope(CaseSet.objects.select_related("project"), VIEW)
    context = {"nav": "evals", "case_sets": found, "projects": access.projects(CHANGE)}
    return render(request, "evals/case_sets.html", context)


@require_GET
@login_required
@object_permission(VIEW, _case_set_project, "pk")
def case_set_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A case set: its current cases and its eval runs (newest first), with the form that
    compares two of them."""
    case_set = get_object_or_404(CaseSet.objects.select_related("project"), pk=pk)
    context = {
        "nav": "evals",
        "case_set": case_set,
        "cases": cases_at(case_set_id=pk, version=case_set.version),
        "eval_runs": case_set.eval_runs.all()[:100],
        "statuses": RunStatus.choices,
        "can_change": Access(request.user).can(CHANGE, case_set.project_id),
    }
    return render(request, "evals/case_set.html", context)


@require_POST
@login_required
@object_permission(CHANGE, _case_set_project, "pk")
def case_set_bulk(request: HttpRequest, pk: int) -> HttpResponse:
    """Add a case per run of the set's project in the chosen statuses created since the
    chosen day (``evals.from_runs.cases_make_from_runs``)."""
    since = parse_date(request.POST.get("since", "") or "")
    try:
        cases = from_runs.cases_make_from_runs(
            case_set_id=pk,
            statuses=request.POST.getlist("status"),
            created_after=(
                datetime.combine(since, time(), tzinfo=timezone.get_current_timezone())
                if since
                else None
            ),
            actor=Actor.for_user(request.user),
        )
    except InvalidInput as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{len(cases)} case(s) added.")
    return redirect("eval-case-set", pk)


@require_GET
@login_required
@object_permission(VIEW, _eval_run_project, "pk")
def eval_run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """An eval run's results table: per case, passed or why not, and the tool calls expected
    next to those made."""
    eval_run = get_object_or_404(EvalRun.objects.select_related("case_set"), pk=pk)
    rows = [
        {
            "result": result,
            "expected": _shown(expected_calls(result.case)),
            "made": _shown(result.made),
        }
        for result in eval_run.results.select_related("case")
    ]
    context = {"nav": "evals", "eval_run": eval_run, "rows": rows}
    return render(request, "evals/eval_run.html", context)


def _eval_run_seen(request: HttpRequest, raw: str) -> EvalRun:
    if not raw.isascii() or not raw.isdigit():
        raise Http404("no such eval run")
    eval_run = EvalRun.objects.select_related("case_set").filter(pk=int(raw)).first()
    if eval_run is None or not Access(request.user).can(VIEW, eval_run.case_set.project_id):
        raise Http404("no such eval run")
    return eval_run


@require_GET
@login_required
@permission_required(VIEW, raise_exception=True)
def eval_run_compare(request: HttpRequest) -> HttpResponse:
    """Two eval runs of one case set side by side (``?first=&second=`` ids): the cases that
    regressed (passed in the first, failed in the second), those fixed, then the rest."""
    first = _eval_run_seen(request, request.GET.get("first", ""))
    second = _eval_run_seen(request, request.GET.get("second", ""))
    try:
        rows = eval_runs_compared(first=first, second=second)
    except InvalidInput as exc:
        messages.error(request, exc.message)
        return redirect("eval-case-set", first.case_set_id)
    counts = {
        change: sum(row.change == change for row in rows) for change in ("fixed", "regressed")
    }
    context = {"nav": "evals", "first": first, "second": second, "rows": rows, "counts": counts}
    return render(request, "evals/compare.html", context)


def _operator_calls(request: HttpRequest) -> list[dict[str, Any]]:
    """The expected call the operator wrote in the form's editor: a tool name and either
    JSON arguments or a condition.

    Raises:
        InvalidInput: the arguments are not a JSON object.
    """
    tool = request.POST.get("tool", "").strip()
    condition = request.POST.get("condition", "").strip()
    if condition:
        return [{"tool": tool, "condition": condition}]
    try:
        args = json.loads(request.POST.get("args", "") or "{}")
    except ValueError as exc:
        raise InvalidInput(f"the arguments are not JSON: {exc}", field="args") from exc
    return [{"tool": tool, "args": args}]


@require_http_methods(["GET", "POST"])
@login_required
@object_permission(CHANGE, _run_project, "run_id")
def case_make(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """ "Make a case" of a run: pick a case set of the run's project, a step, and what was
    expected (the recorded outcome, the step's rejection, or a call written in the editor).
    """
    run = get_object_or_404(Run, pk=run_id)
    case_sets = list(CaseSet.objects.filter(project_id=run.project_id))
    steps = list(Step.objects.filter(run=run).order_by("index").only("index", "tool", "status"))
    form = request.POST if request.method == "POST" else request.GET
    if request.method == "POST":
        try:
            set_id = int(form.get("case_set", ""))
            if set_id not in {c.pk for c in case_sets}:
                raise InvalidInput("choose a case set of this run's project", field="case_set")
            expect = form.get("expect", "")
            case = from_runs.case_make_from_run(
                case_set_id=set_id,
                run_id=run.pk,
                step_index=int(form.get("step_index", "")),
                expect=expect,
                calls=_operator_calls(request) if expect == from_runs.OPERATOR else None,
                final_contains=form.get("final_contains", "").strip(),
                name=form.get("name", "").strip()[:300],
                actor=Actor.for_user(request.user),
            )
        except ValueError:
            messages.error(request, "choose a case set and a step")
        except InvalidInput as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"Case “{case.name}” added to the case set.")
            return redirect("eval-case-set", case.case_set_id)
    context = {
        "nav": "evals",
        "run": run,
        "case_sets": case_sets,
        "steps": steps,
        "form": form,
    }
    return render(request, "evals/case_make.html", context)
