"""The fragments a run's page loads when a folded section is opened (a step's state changes
and attempts, the run's earlier audit events), and the state versions that a run's page and a
session's page share (``session_views`` uses the same functions for a session's)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required, permission_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from audit.selectors import event_list
from projects.views import object_permission
from runs import selectors
from runs.models import Checkpoint, Run, StateVersion, Step
from runs.state_diff import StepStates, json_diff

# A run's timeline reaches at most this many of its latest audit events (the events API has
# all): the latest EVENTS_SHOWN in the page, the earlier ones loaded when the reader opens them.
TIMELINE_EVENTS = 200
EVENTS_SHOWN = 50
# The rows of a state diff a fragment shows (the rest are counted): agent data may be huge.
DIFF_ROWS_SHOWN = 200
# The latest versions of an agent state (a run's or a session's) a page lists (each one's diff
# loaded when opened); the earlier ones come, as many at a time, when the reader opens them.
STATE_VERSIONS_SHOWN = 50
PLACEHOLDER = 987654321


def run_project(run_id: uuid.UUID) -> int | None:
    """The project of run ``run_id`` (None: no such run): every run page's permission check."""
    return Run.objects.filter(pk=run_id).values_list("project_id", flat=True).first()


def object_view(
    project_of: Callable[[Any], int | None], kwarg: str, perm: str = "runs.view_run"
) -> Callable[[Any], Any]:
    """The checks of a page of one object (its URL's ``kwarg``, its project
    ``project_of(id)``): a logged-in user holding ``perm`` in the object's project
    (``projects.views.object_permission``: 404 when they may not see the object, 403 when
    they may not act on it)."""

    def decorate(view: Any) -> Any:
        checked = object_permission(perm, project_of, kwarg)(view)
        return login_required(permission_required(perm, raise_exception=True)(checked))

    return decorate


def run_view(perm: str = "runs.view_run") -> Callable[[Any], Any]:
    """``object_view`` of a page of one run (its URL's ``run_id``)."""
    return object_view(run_project, "run_id", perm)


def paths_by(name: str, args: list[Any], keys: list[int]) -> dict[int, str]:
    """The path of URL ``name`` with ``args`` and then each of ``keys`` (an index, a version)
    as its last argument, by key (one reverse())."""
    path = reverse(name, args=[*args, PLACEHOLDER])
    marker = f"/{PLACEHOLDER}/"
    return {key: path.replace(marker, f"/{key}/") for key in keys}


def versions_context(owner: dict[str, uuid.UUID], names: tuple[str, str], before: int | None):
    """What ``runs/_state_versions.html`` lists for an agent state's owner (``{"run_id": id}``
    or ``{"session_id": id}``): its latest ``STATE_VERSIONS_SHOWN`` versions below ``before``
    (None: all), their number, each one's diff path (URL ``names[0]``) and the path of the
    earlier ones (URL ``names[1]``)."""
    versions, total = selectors.state_version_list(
        **owner, before=before, limit=STATE_VERSIONS_SHOWN
    )
    owner_id = next(iter(owner.values()))
    return {
        "state_versions": versions,
        "state_versions_total": total,
        "state_version_paths": paths_by(names[0], [owner_id], [row.version for row in versions]),
        "earlier_versions_url": reverse(names[1], args=[owner_id]),
    }


def before_param(request: HttpRequest, limit: int, what: str) -> int | HttpResponse:
    """The ``?before=`` of a fragment of earlier rows: a positive integer below ``limit``, or
    a 400 answer saying that ``what`` (a state version, an audit event id) is required."""
    before = request.GET.get("before", "")
    if before.isascii() and before.isdigit() and 0 < int(before) < limit:
        return int(before)
    return HttpResponse(
        f"before: {what} (a positive integer) is required.",
        status=400,
        content_type="text/plain; charset=utf-8",
    )


def state_version_page(
    request: HttpRequest, version: int, get: Callable[[int], selectors.AgentState]
) -> HttpResponse:
    """What ``version`` of an agent state (``get(version)`` reads one) changed from the one
    before: ``runs/_state_version.html``, its first ``DIFF_ROWS_SHOWN`` changes and the whole
    state.

    Raises:
        Http404: no such version.
    """
    if version >= 2**31:
        raise Http404("no such state version")
    try:
        after = get(version)
        before = get(version - 1).state if version > 0 else {}
    except StateVersion.DoesNotExist:
        raise Http404("no such state version") from None
    context = {
        "version": version,
        "change": StepStates(before, after.state, json_diff(before, after.state)),
        "rows_shown": DIFF_ROWS_SHOWN,
    }
    return render(request, "runs/_state_version.html", context)


def event_anchors(steps: list[tuple[int, int, int | None]]) -> dict[tuple[str, str], str]:
    """Where each audit event's object is on the run's page, by ``(object_type, object_id)``:
    ``steps`` are ``(step id, index, approval request id or None)``."""
    anchors = {("step", str(pk)): f"#step-{index}" for pk, index, _ in steps}
    anchors.update(
        (("approval", str(approval)), f"#approval-{approval}")
        for _, _, approval in steps
        if approval is not None
    )
    return anchors


@require_GET
@run_view()
def run_step_state(request: HttpRequest, run_id: uuid.UUID, index: int) -> HttpResponse:
    """What step ``index`` of the run changed in its state (an HTML fragment, loaded when the
    step's "Run state" section is opened): the changes (``runs.state_diff``) from the state
    before it (the latest earlier checkpoint, or ``{}``) to its checkpoint, and the whole state
    after it.

    Raises:
        Http404: no such step, or it has no checkpoint (it has not succeeded).
    """
    checkpoints = list(
        Checkpoint.objects.filter(run_id=run_id, index__lte=index)
        .order_by("-index")
        .values_list("index", "state")[:2]
    )
    if not checkpoints or checkpoints[0][0] != index:
        raise Http404("this step has no checkpoint")
    after = checkpoints[0][1]
    before = checkpoints[1][1] if len(checkpoints) > 1 else {}
    context = {
        "index": index,
        "change": StepStates(before, after, json_diff(before, after)),
        "agent_change": selectors.agent_state_written_for_step(run_id=run_id, index=index),
        "rows_shown": DIFF_ROWS_SHOWN,
    }
    return render(request, "runs/_step_state.html", context)


@require_GET
@run_view()
def run_state_version(request: HttpRequest, run_id: uuid.UUID, version: int) -> HttpResponse:
    """What version ``version`` of the run's agent state changed from the version before (an
    HTML fragment, loaded when the version is opened in the page's "Agent state" section).

    Raises:
        Http404: the run has no such version.
    """
    return state_version_page(
        request, version, lambda number: selectors.agent_state_get(run_id=run_id, version=number)
    )


@require_GET
@run_view()
def run_state_versions(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """The run's agent state versions below ``?before=`` (a version number), newest first, at
    most ``STATE_VERSIONS_SHOWN`` (an HTML fragment, loaded when the page's "Earlier
    versions" section is opened; it ends with the next such section). A ``before`` that is
    not a positive integer answers 400."""
    before = before_param(request, 2**31, "a state version")
    if isinstance(before, HttpResponse):
        return before
    names = ("run-state-version", "run-state-versions")
    context = versions_context({"run_id": run_id}, names, before)
    return render(request, "runs/_state_versions.html", context)


@require_GET
@run_view()
def run_step_attempts(request: HttpRequest, run_id: uuid.UUID, index: int) -> HttpResponse:
    """The attempts of step ``index`` of the run, in number order (an HTML fragment, loaded
    when the step's "Attempts" section is opened).

    Raises:
        Http404: the run has no such step.
    """
    step_id = Step.objects.filter(run_id=run_id, index=index).values_list("pk", flat=True).first()
    if step_id is None:
        raise Http404("no such step")
    attempts = selectors.step_attempts(step_ids=[step_id]).get(step_id, [])
    return render(request, "runs/_step_attempts.html", {"attempts": attempts})


@require_GET
@run_view()
def run_events(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """The run's audit events before the page's first (``?before=`` an event id), newest
    last, at most ``TIMELINE_EVENTS - EVENTS_SHOWN`` of them: an HTML fragment, loaded when
    the page's "Earlier events" section is opened. A ``before`` that is not a positive integer
    answers 400."""
    before = before_param(request, 2**63, "an audit event id")
    if isinstance(before, HttpResponse):
        return before
    earlier = list(
        event_list(run_id=run_id)
        .filter(id__lt=before)
        .order_by("-id")[: TIMELINE_EVENTS - EVENTS_SHOWN]
    )
    steps = Step.objects.filter(run_id=run_id).values_list("pk", "index", "approval__pk")
    context = {"events": earlier[::-1], "anchors": event_anchors(list(steps))}
    return render(request, "runs/_events_table.html", context)
