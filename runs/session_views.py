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
from projects.views import object_permission
from runs import context_selectors, selectors
from runs.models import AgentSession, Run, StateVersion
from runs.state_diff import StepStates, json_diff
from runs.views import DIFF_ROWS_SHOWN, MESSAGES_SHOWN, STATE_VERSIONS_SHOWN

SESSIONS_PER_PAGE = 50
# A session's page lists at most this many of its runs (the newest; the API has them all).
RUNS_SHOWN = 100
_PLACEHOLDER = 987654321


def _session_project(session_id: uuid.UUID) -> int | None:
    return AgentSession.objects.filter(pk=session_id).values_list("project_id", flat=True).first()


@require_GET
@login_required
@permission_required("runs.view_run", raise_exception=True)
def session_list(request: HttpRequest) -> HttpResponse:
    """The sessions of the user's projects, newest first, 50 a page (``?page=``)."""
    sessions = Access(request.user).scope(selectors.session_list(), "runs.view_run")
    page = Paginator(sessions, SESSIONS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "runs/session_list.html", {"nav": "sessions", "page": page})


def _versions_context(session_id: uuid.UUID, before: int | None = None) -> dict[str, Any]:
    versions, total = selectors.state_version_list(
        session_id=session_id, before=before, limit=STATE_VERSIONS_SHOWN
    )
    path = reverse("session-state-version", args=[session_id, _PLACEHOLDER])
    marker = f"/{_PLACEHOLDER}/"
    return {
        "state_versions": versions,
        "state_versions_total": total,
        "state_version_paths": {
            row.version: path.replace(marker, f"/{row.version}/") for row in versions
        },
        "earlier_versions_url": reverse("session-state-versions", args=[session_id]),
    }


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
        **_versions_context(session.pk),
    }


@require_GET
@login_required
@permission_required("runs.view_run", raise_exception=True)
@object_permission("runs.view_run", _session_project, "session_id")
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
@login_required
@permission_required("runs.view_run", raise_exception=True)
@object_permission("runs.view_run", _session_project, "session_id")
def session_detail_fragment(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """The changing part of a session's page alone, for live refreshes."""
    return render(request, "runs/_session_body.html", _session_context(session_id))


@require_GET
@login_required
@permission_required("runs.view_run", raise_exception=True)
@object_permission("runs.view_run", _session_project, "session_id")
def session_state_versions(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """The session's state versions below ``?before=`` (as ``runs.views.run_state_versions``
    for a run's); a ``before`` that is not a positive integer answers 400."""
    before = request.GET.get("before", "")
    if not (before.isascii() and before.isdigit() and 0 < int(before) < 2**31):
        return HttpResponse(
            "before: a state version (a positive integer) is required.",
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    return render(request, "runs/_state_versions.html", _versions_context(session_id, int(before)))


@require_GET
@login_required
@permission_required("runs.view_run", raise_exception=True)
@object_permission("runs.view_run", _session_project, "session_id")
def session_state_version(
    request: HttpRequest, session_id: uuid.UUID, version: int
) -> HttpResponse:
    """What version ``version`` of the session's state changed from the one before (the run
    page's fragment, ``runs/_state_version.html``).

    Raises:
        Http404: the session has no such version.
    """
    if version >= 2**31:
        raise Http404("no such state version")
    try:
        after = selectors.session_state_get(session_id=session_id, version=version)
        before = (
            selectors.session_state_get(session_id=session_id, version=version - 1).state
            if version > 0
            else {}
        )
    except StateVersion.DoesNotExist:
        raise Http404("no such state version") from None
    context = {
        "version": version,
        "change": StepStates(before, after.state, json_diff(before, after.state)),
        "rows_shown": DIFF_ROWS_SHOWN,
    }
    return render(request, "runs/_state_version.html", context)
