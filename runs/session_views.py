"""Session pages: the sessions list and a session's page (its runs, its whole conversation,
its state versions), live like a run's timeline (``static/js/live.js`` re-fetches the
fragment on each event of the session's chain, ``/ws/sessions/<uuid>/``)."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.decorators import login_required, permission_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from audit.models import session_chain
from audit.streams import stream_head
from projects.access import Access
from runs import context_selectors, selectors
from runs.models import AgentSession, Run
from runs.state_views import before_param, object_view, state_version_page, versions_context
from runs.views import MESSAGES_SHOWN

SESSIONS_PER_PAGE = 50
# A session's page lists at most this many of its runs (the newest; the API has them all).
RUNS_SHOWN = 100
_VERSION_URLS = ("session-state-version", "session-state-versions")


def _session_project(session_id: uuid.UUID) -> int | None:
    return AgentSession.objects.filter(pk=session_id).values_list("project_id", flat=True).first()


_session_view = object_view(_session_project, "session_id")


@require_GET
@login_required
@permission_required("runs.view_run", raise_exception=True)
def session_list(request: HttpRequest) -> HttpResponse:
    """The sessions of the user's projects, newest first, 50 a page (``?page=``)."""
    sessions = Access(request.user).scope(selectors.session_list(), "runs.view_run")
    page = Paginator(sessions, SESSIONS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "runs/session_list.html", {"nav": "sessions", "page": page})


def _session_context(session_id: uuid.UUID) -> dict[str, Any]:
    session = selectors.session_list().filter(pk=session_id).first()
    if session is None:
        raise Http404("no such session")
    runs = Run.objects.filter(session=session).order_by("-created_at", "-id")
    messages = context_selectors.session_messages_last(session_id=session.pk, last=MESSAGES_SHOWN)
    return {
        "session": session,
        "runs": list(runs[:RUNS_SHOWN]),
        "runs_total": runs.count(),
        "conversation_rows": messages,
        "messages_total": session.message_count,
        **versions_context({"session_id": session.pk}, _VERSION_URLS, None),
    }


@require_GET
@_session_view
def session_detail(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """A session's page: its facts, runs, conversation (the latest ``MESSAGES_SHOWN``
    messages, removed ones marked) and state versions, live.

    Raises:
        Http404: unknown session, or one of a project the user may not see.
    """
    after = stream_head(chain=session_chain(session_id))
    context = _session_context(session_id)
    context.update(
        nav="sessions",
        last_event_id=after,
        ws_path=f"/ws/sessions/{session_id}/",
        fragment_url=reverse("session-detail-fragment", args=[session_id]),
    )
    return render(request, "runs/session_detail.html", context)


@require_GET
@_session_view
def session_detail_fragment(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """The changing part of a session's page alone, for live refreshes."""
    return render(request, "runs/_session_body.html", _session_context(session_id))


@require_GET
@_session_view
def session_state_versions(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """The session's state versions below ``?before=`` (as ``runs.state_views.run_state_versions``
    for a run's); a ``before`` that is not a positive integer answers 400."""
    before = before_param(request, 2**31, "a state version")
    if isinstance(before, HttpResponse):
        return before
    context = versions_context({"session_id": session_id}, _VERSION_URLS, before)
    return render(request, "runs/_state_versions.html", context)


@require_GET
@_session_view
def session_state_version(
    request: HttpRequest, session_id: uuid.UUID, version: int
) -> HttpResponse:
    """What version ``version`` of the session's state changed from the one before (the run
    page's fragment, ``runs/_state_version.html``).

    Raises:
        Http404: the session has no such version.
    """
    return state_version_page(
        request,
        version,
        lambda number: selectors.session_state_get(session_id=session_id, version=number),
    )
