"""The runs list page and its live fragment.

The page renders its table from one fragment template; the page's script re-fetches that
fragment (``run-list-fragment``) whenever its WebSocket reports an event.
"""

from __future__ import annotations

import functools
import uuid
import zoneinfo
from typing import Any
from zoneinfo import ZoneInfo

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from agentops.errors import Conflict, InvalidInput
from projects.access import Access
from runs import list_pages, list_selectors, saved_views, selectors
from runs.filters import RunFilter, filter_problems
from runs.models import AgentKind, Run
from runs.models.saved_views import SavedView
from runs.saved_views import saved_view_list, saved_view_query
from runs.statuses import run_status_choices
from runs.views import last_event_id

RUNS_PER_PAGE = 50
_PATH_PLACEHOLDER = uuid.UUID(int=0)
# What a link to the list (a column header, a saved view) keeps of its query string.
_KEPT = [*RunFilter.base_filters, "sort", "tz"]


def _zone(request: HttpRequest) -> tuple[str, ZoneInfo]:
    """The browser's time zone the page's script sent (``tz``, an IANA name; none: UTC).

    Raises:
        InvalidInput: an unknown zone name.
    """
    name = request.GET.get("tz", "").strip() or "UTC"
    if name not in _zone_names():
        raise InvalidInput("an unknown time zone", field="tz")
    return name, ZoneInfo(name)


@functools.cache
def _zone_names() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones()) | {"UTC"}


def _filtered(request: HttpRequest, context: dict[str, Any]) -> QuerySet[Run] | None:
    """The runs the list's filters select (None: a filter is wrong, ``problems`` says how).
    Date-times without a zone are the browser's (``tz``) and shown back in it."""
    runs = selectors.run_list()
    given = context["filters"]
    try:
        zone_name, zone = _zone(request)
    except InvalidInput as exc:
        context["problems"].append(f"{exc.field}: {exc.message}")
        return None
    context["zone"] = zone_name
    if not given:
        return runs
    with timezone.override(zone):
        filterset = RunFilter(given, queryset=runs, request=request)
        if not filterset.is_valid():
            context["problems"].extend(filter_problems(filterset))
            return None
    # The form's datetime-local fields show a moment only as YYYY-MM-DDTHH:MM[:SS].
    for name in ("created_from", "created_to"):
        moment = filterset.form.cleaned_data.get(name)
        if moment is not None:
            context["filters"][name] = moment.astimezone(zone).strftime("%Y-%m-%dT%H:%M:%S")
    return filterset.qs


def _run_list_context(request: HttpRequest) -> dict[str, Any]:
    """The runs list's data: ``page`` (``list_pages.KeysetPage``) and ``rows``
    (``list_selectors.RunListRow``, the run page's path), the filters as given (``filters``, empty
    fields dropped), the ``sort`` and ``problems`` (what is wrong with the filters, sort, time
    zone or page link: then no runs are listed, rather than runs the user would take for
    filtered ones). ``query`` is the filters, sort and zone as a query string, which the
    column headers, the pager and a saved view extend."""
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
        "sorts": list_pages.SORTS,
        "page": None,
        "rows": [],
    }
    context["query"] = saved_view_query(request.GET.items(), kept=_KEPT)
    context["filter_query"] = saved_view_query(
        request.GET.items(), kept=[name for name in _KEPT if name != "sort"]
    )
    runs = _filtered(request, context)
    try:
        sort = list_pages.sort_of(request.GET.get("sort", "").strip())
        token = request.GET.get("cursor", "")
        cursor = list_pages.cursor_decode(token, sort) if token else None
    except InvalidInput as exc:
        context["problems"].append(f"{exc.field}: {exc.message}")
        return context
    context["sort"] = sort
    if runs is None:
        return context
    values = list_selectors.run_list_values(Access(request.user).scope(runs, "runs.view_run"))
    position = list_selectors.LIST_FIELDS.index(sort.column)
    page = list_pages.keyset_page(
        values,
        sort=sort,
        cursor=cursor,
        as_of=timezone.now(),
        size=RUNS_PER_PAGE,
        key=lambda row: (row[position], row[0]),
    )
    # Count steps for this page's runs only: an annotation on the whole list would make the
    # database aggregate every run's steps before it can sort and cut the page.
    found = list_selectors.run_list_rows(page.rows, now=timezone.now())
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
    """The runs of the user's projects, filtered by the GET parameters of
    ``runs.filters.RunFilter`` (empty ones ignored; ``q`` searches the words of goals, tool
    calls and conversations), sorted by ``?sort=`` (``runs.list_pages.SORTS``, newest first
    by default), 50 a page, later pages by ``?cursor=`` (stable: runs created after the first
    page was read never shift them). ``?tz=`` is the browser's time zone, in which date-time
    filters are read and shown. Bad values answer 400 with the page saying what is wrong, and
    no runs. The user's saved views are listed (``runs.saved_views``)."""
    after = last_event_id()
    context = _run_list_context(request)
    context.update(
        nav="runs",
        projects=Access(request.user).projects("runs.view_run"),
        last_event_id=after,
        ws_path="/ws/runs/",
        fragment_url=reverse("run-list-fragment"),
        saved_views=saved_view_list(owner_id=_owner(request)),
    )
    return _render_run_list(request, "runs/run_list.html", context)


@require_GET
@login_required
@permission_required("runs.view_run", raise_exception=True)
def run_list_fragment(request: HttpRequest) -> HttpResponse:
    """The runs table alone (same query parameters as ``run_list``), for live refreshes."""
    return _render_run_list(request, "runs/_run_table.html", _run_list_context(request))


def _owner(request: HttpRequest) -> int:
    # Signed in (every view of the list requires it): the user has an id.
    return int(request.user.pk or 0)


def _list_url(query: str) -> str:
    return f"{reverse('run-list')}?{query}" if query else reverse("run-list")


@require_POST
@login_required
@permission_required("runs.view_run", raise_exception=True)
def saved_view_create(request: HttpRequest) -> HttpResponse:
    """Save the list's current filters and sort (POST ``query``: the list's query string,
    narrowed by ``saved_view_query``) as the user's view ``name``, then back to the list with
    it. A refusal (no name, a name taken, too long) is an error message; nothing is saved."""
    query = saved_view_query(QueryDict(request.POST.get("query", "")).items(), kept=_KEPT)
    name = request.POST.get("name", "")
    try:
        saved_views.saved_view_create(owner_id=_owner(request), name=name, query=query)
    except (InvalidInput, Conflict) as exc:
        messages.error(request, f"Could not save the view: {exc}.")
    else:
        messages.success(request, f"Saved the view “{name.strip()}”.")
    return redirect(_list_url(query))


@require_POST
@login_required
@permission_required("runs.view_run", raise_exception=True)
def saved_view_delete(request: HttpRequest, view_id: int) -> HttpResponse:
    """Delete the user's saved view ``view_id`` (another user's or an unknown one: 404), then
    back to the list."""
    try:
        saved_views.saved_view_delete(owner_id=_owner(request), view_id=view_id)
    except SavedView.DoesNotExist:
        raise Http404("no such saved view") from None
    messages.success(request, "Deleted the saved view.")
    return redirect("run-list")
