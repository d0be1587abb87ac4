"""The runs list page and its live fragment.

The page renders its table from one fragment template; the page's script re-fetches that
fragment (``run-list-fragment``) whenever its WebSocket reports an event.
"""

from __future__ import annotations

import uuid
from datetime import UTC
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required, permission_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from projects.access import Access
from runs import selectors
from runs.filters import RunFilter, filter_problems
from runs.models import AgentKind
from runs.statuses import run_status_choices
from runs.views import last_event_id

RUNS_PER_PAGE = 50
_PATH_PLACEHOLDER = uuid.UUID(int=0)


def _run_list_context(request: HttpRequest) -> dict[str, Any]:
    """The runs list's data: ``page`` and ``rows`` (``selectors.RunListRow``, the run page's
    path), the filters as given (``filters``, empty fields dropped; none given, no filter set
    is built), ``problems`` (the filters' errors: then no runs are listed, rather than runs
    the user would take for filtered ones)."""
    access = Access(request.user)
    given = {
        name: value
        for name in RunFilter.base_filters
        if (value := request.GET.get(name, "").strip())
    }
    context: dict[str, Any] = {
        "filters": dict(given),
        "statuses": run_status_choices(),
        "agents": AgentKind.choices,
        "agent_labels": dict(AgentKind.choices),
        "problems": [],
        "query": urlencode(given),
    }
    runs = selectors.run_list()
    if given:
        filterset = RunFilter(given, queryset=runs, request=request)
        if not filterset.is_valid():
            context.update(problems=filter_problems(filterset), page=None, rows=[])
            return context
        # The form's datetime-local fields show a moment only as YYYY-MM-DDTHH:MM[:SS] (UTC).
        for name in ("created_from", "created_to"):
            moment = filterset.form.cleaned_data.get(name)
            if moment is not None:
                context["filters"][name] = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
        runs = filterset.qs
    values = selectors.run_list_values(access.scope(runs, "runs.view_run"))
    page = Paginator(values, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    # Count steps for this page's runs only: an annotation on the whole list would make the
    # database aggregate every run's steps before it can sort and cut the page.
    found = selectors.run_list_rows(page.object_list, now=timezone.now())
    # One reverse() for the page rather than one a row: the run's id put into a resolved path.
    path = reverse("run-detail", args=[_PATH_PLACEHOLDER])
    rows = [(run, path.replace(str(_PATH_PLACEHOLDER), str(run.pk))) for run in found]
    context.update(page=page, rows=rows)
    return context


def _render_run_list(request: HttpRequest, template: str, context: dict[str, Any]) -> HttpResponse:
    return render(request, template, context, status=400 if context["problems"] else 200)


@require_GET
@login_required
@permission_required("runs.view_run", raise_exception=True)
def run_list(request: HttpRequest) -> HttpResponse:
    """The runs of the user's projects, newest first, filtered by the GET parameters of
    ``runs.filters.RunFilter`` (empty ones ignored), ``?page=`` pages (50 a page). Bad filter
    values answer 400 with the page saying what is wrong, and no runs."""
    after = last_event_id()
    context = _run_list_context(request)
    context.update(
        nav="runs",
        projects=Access(request.user).projects("runs.view_run"),
        last_event_id=after,
        ws_path="/ws/runs/",
        fragment_url=reverse("run-list-fragment"),
    )
    return _render_run_list(request, "runs/run_list.html", context)


@require_GET
@login_required
@permission_required("runs.view_run", raise_exception=True)
def run_list_fragment(request: HttpRequest) -> HttpResponse:
    """The runs table alone (same query parameters as ``run_list``), for live refreshes."""
    return _render_run_list(request, "runs/_run_table.html", _run_list_context(request))
