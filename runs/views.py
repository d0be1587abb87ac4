"""Run pages: a run's timeline, its live fragments, cancel, resume, fork (the runs list:
``runs.list_views``).

Each page renders its changing part from one fragment template; the page's script re-fetches
that fragment (``*-fragment`` URLs) whenever its WebSocket reports an event.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.db import connection
from django.db.models import Count, Window, prefetch_related_objects
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_fsm import ConcurrentTransition, TransitionNotAllowed

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from artifacts.selectors import run_artifacts
from audit.selectors import event_list
from audit.streams import stream_head
from projects.views import object_permission
from runs import selectors
from runs.control import fork, lifecycle, settle
from runs.models import Checkpoint, Run, StateVersion, Step
from runs.state_diff import StepStates, json_diff, state_change_counts
from runs.statuses import StepStatus

# A run's timeline reaches at most this many of its latest audit events (the events API has
# all): the latest EVENTS_SHOWN in the page, the earlier ones loaded when the reader opens them.
TIMELINE_EVENTS = 200
EVENTS_SHOWN = 50
# The rows of a state diff a fragment shows (the rest are counted): agent data may be huge.
DIFF_ROWS_SHOWN = 200
# A run's page shows the latest messages of its conversation (the API pages through all).
MESSAGES_SHOWN = 100
# Steps whose "Attempts" section opens with the run page, its attempts in it.
_RETRIED = frozenset({StepStatus.FAILED, StepStatus.WAITING_RETRY})
# The latest versions of a run's agent state its page lists (each one's diff loaded when
# opened); the earlier ones come, as many at a time, when the reader opens them.
STATE_VERSIONS_SHOWN = 50
_RUN_PROJECT = "SELECT project_id FROM runs_run WHERE id = %s"
_INDEX_PLACEHOLDER = 987654321


def last_event_id(*, run_id: uuid.UUID | None = None) -> int:
    """The cursor of the live stream (of one run, when given) as the log is now
    (``audit.streams.stream_head``: an event id; 0 when there is none).

    Pages read it before their data and hand it to their WebSocket as ``?after=``, so an event
    committed while the page renders is replayed rather than lost.
    """
    return stream_head(run_id=run_id)


def _run_id_param(run_id: uuid.UUID) -> Any:
    """A run id as a parameter of raw SQL, in the backend's own form (SQLite: hex text)."""
    return Run._meta.pk.get_db_prep_value(run_id, connection)


def _run_project(run_id: uuid.UUID) -> int | None:
    # The project of every run page's permission check: raw SQL, a fifth of the ORM's time.
    with connection.cursor() as cursor:
        cursor.execute(_RUN_PROJECT, [_run_id_param(run_id)])
        row = cursor.fetchone()
    return row[0] if row else None


def _event_anchors(steps: list[tuple[int, int, int | None]]) -> dict[tuple[str, str], str]:
    """Where each audit event's object is on the run's page, by ``(object_type, object_id)``:
    ``steps`` are ``(step id, index, approval request id or None)``."""
    anchors = {("step", str(pk)): f"#step-{index}" for pk, index, _ in steps}
    anchors.update(
        (("approval", str(approval)), f"#approval-{approval}")
        for _, _, approval in steps
        if approval is not None
    )
    return anchors


def _step_paths(name: str, run_id: uuid.UUID, steps: list[Step]) -> dict[int, str]:
    """The path of each step's fragment ``name`` (``run-step-state``, ``run-step-attempts``)
    by step id (one reverse())."""
    path = reverse(name, args=[run_id, _INDEX_PLACEHOLDER])
    marker = f"/{_INDEX_PLACEHOLDER}/"
    return {step.pk: path.replace(marker, f"/{step.index}/") for step in steps}


def _state_version_paths(run_id: uuid.UUID, versions: list[StateVersion]) -> dict[int, str]:
    """The path of each agent state version's diff fragment by version (one reverse())."""
    path = reverse("run-state-version", args=[run_id, _INDEX_PLACEHOLDER])
    marker = f"/{_INDEX_PLACEHOLDER}/"
    return {row.version: path.replace(marker, f"/{row.version}/") for row in versions}


def _state_versions_context(run_id: uuid.UUID, before: int | None = None) -> dict[str, Any]:
    versions, total = selectors.state_version_list(
        run_id=run_id, before=before, limit=STATE_VERSIONS_SHOWN
    )
    return {
        "state_versions": versions,
        "state_versions_total": total,
        "state_version_paths": _state_version_paths(run_id, versions),
        "earlier_versions_url": reverse("run-state-versions", args=[run_id]),
    }


def _run_detail_context(run_id: uuid.UUID) -> dict[str, Any]:
    try:
        run = selectors.run_list().select_related("session").get(pk=run_id)
    except Run.DoesNotExist:
        raise Http404("no such run") from None
    steps = selectors.run_page_steps(run_id=run.pk)
    prefetch_related_objects(steps, "approval__decisions")
    # A step's attempts are listed in a folded section, loaded when opened, except where the
    # section opens with the page: a failed step, or one waiting for a retry.
    attempts = selectors.step_attempts(
        step_ids=[step.pk for step in steps if step.status in _RETRIED]
    )
    # The states as plain values (no model per checkpoint): only their diffs' sizes are shown.
    # Unordered: the checkpoints' default order (by run, then the run's own) would join runs.
    checkpoints = dict(
        Checkpoint.objects.filter(run_id=run.pk).order_by().values_list("step_id", "state")
    )
    # A fork may start at any step whose predecessors all succeeded.
    leading_succeeded = next(
        (i for i, step in enumerate(steps) if step.status != StepStatus.SUCCEEDED), len(steps)
    )
    # The run's number of events comes with its latest ones: a window over the same rows,
    # counted before the LIMIT cuts them.
    latest = list(
        event_list(run_id=run.pk)
        .annotate(run_events=Window(Count("id")))
        .order_by("-id")[:EVENTS_SHOWN]
    )
    family = Run.objects.only("id", "goal", "status", "gate", "created_at", "forked_from_id")
    step_refs = [
        (step.pk, step.index, step.approval.pk if hasattr(step, "approval") else None)
        for step in steps
    ]
    return {
        "run": run,
        "args_edits": selectors.args_edits(run_ids=[run.pk], step_ids=[step.pk for step in steps]),
        # Only what the server recorded when it forked (never the client's metadata).
        "parent": (
            family.filter(pk=run.forked_from_id).first()
            if run.forked_from_id and run.forked_from_index is not None
            else None
        ),
        "forks": list(
            family.filter(forked_from=run, forked_from_index__isnull=False).order_by(
                "created_at", "id"
            )
        ),
        # Only how many changes each step made: the diff itself is loaded when opened.
        "state_changes": state_change_counts(steps, checkpoints),
        # The steps the agent wrote its own state for (their diffs show what it wrote).
        "agent_state_steps": selectors.state_written_steps(run_id=run.pk),
        "artifacts": run_artifacts(run_id=run.pk),
        "state_paths": _step_paths("run-step-state", run.pk, steps),
        "attempt_paths": _step_paths("run-step-attempts", run.pk, steps),
        "anchors": _event_anchors(step_refs),
        "steps": steps,
        "attempts_by_step": attempts,
        "steps_done": sum(
            step.status == StepStatus.SUCCEEDED and not step.tool_error for step in steps
        ),
        "tool_errors": sum(step.tool_error for step in steps),
        "fork_until": leading_succeeded,
        "conversation": [
            message.as_openai()
            for message in selectors.messages_before(
                run_id=run.pk, end=run.message_count, last=MESSAGES_SHOWN
            )
        ],
        "messages_total": run.message_count,
        "events": latest[::-1],
        "events_total": latest[0].run_events if len(latest) == EVENTS_SHOWN else len(latest),
        "events_reachable": TIMELINE_EVENTS,
        **_state_versions_context(run.pk),
    }


@require_GET
@login_required
@permission_required("runs.view_run", raise_exception=True)
@object_permission("runs.view_run", _run_project, "run_id")
def run_detail(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """A run's timeline: header (with the run it was forked from and its forks), steps with
    attempts, approvals and the state before and after each, conversation, audit events
    (linked to their step or approval).

    Raises:
        Http404: unknown run.
    """
    after = last_event_id(run_id=run_id)
    context = _run_detail_context(run_id)
    context.update(
        nav="runs",
        last_event_id=after,
        ws_path=f"/ws/runs/{run_id}/",
        fragment_url=reverse("run-detail-fragment", args=[run_id]),
    )
    return render(request, "runs/run_detail.html", context)


@require_GET
@login_required
@permission_required("runs.view_run", raise_exception=True)
@object_permission("runs.view_run", _run_project, "run_id")
def run_detail_fragment(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """The changing part of a run's timeline alone, for live refreshes."""
    return render(request, "runs/_run_body.html", _run_detail_context(run_id))


@require_GET
@login_required
@permission_required("runs.view_run", raise_exception=True)
@object_permission("runs.view_run", _run_project, "run_id")
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
@login_required
@permission_required("runs.view_run", raise_exception=True)
@object_permission("runs.view_run", _run_project, "run_id")
def run_state_version(request: HttpRequest, run_id: uuid.UUID, version: int) -> HttpResponse:
    """What version ``version`` of the run's agent state changed from the version before (an
    HTML fragment, loaded when the version is opened in the page's "Agent state" section):
    the changes (``runs.state_diff``, the first ``DIFF_ROWS_SHOWN``) and the whole state.

    Raises:
        Http404: the run has no such version.
    """
    if version >= 2**31:
        raise Http404("no such state version")
    try:
        after = selectors.agent_state_get(run_id=run_id, version=version)
        before = (
            selectors.agent_state_get(run_id=run_id, version=version - 1).state
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


@require_GET
@login_required
@permission_required("runs.view_run", raise_exception=True)
@object_permission("runs.view_run", _run_project, "run_id")
def run_state_versions(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """The run's agent state versions below ``?before=`` (a version number), newest first, at
    most ``STATE_VERSIONS_SHOWN`` (an HTML fragment, loaded when the page's "Earlier
    versions" section is opened; it ends with the next such section). A ``before`` that is
    not a positive integer answers 400."""
    before = request.GET.get("before", "")
    if not (before.isascii() and before.isdigit() and 0 < int(before) < 2**31):
        return HttpResponse(
            "before: a state version (a positive integer) is required.",
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    context = _state_versions_context(run_id, int(before))
    return render(request, "runs/_state_versions.html", context)


@require_GET
@login_required
@permission_required("runs.view_run", raise_exception=True)
@object_permission("runs.view_run", _run_project, "run_id")
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
@login_required
@permission_required("runs.view_run", raise_exception=True)
@object_permission("runs.view_run", _run_project, "run_id")
def run_events(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """The run's audit events before the page's first (``?before=`` an event id), newest
    last, at most ``TIMELINE_EVENTS - EVENTS_SHOWN`` of them: an HTML fragment, loaded when
    the page's "Earlier events" section is opened. A ``before`` that is not a positive integer
    answers 400."""
    before = request.GET.get("before", "")
    if not (before.isascii() and before.isdigit() and 0 < int(before) < 2**63):
        return HttpResponse(
            "before: an audit event id (a positive integer) is required.",
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    earlier = list(
        event_list(run_id=run_id)
        .filter(id__lt=int(before))
        .order_by("-id")[: TIMELINE_EVENTS - EVENTS_SHOWN]
    )
    steps = Step.objects.filter(run_id=run_id).values_list("pk", "index", "approval__pk")
    context = {"events": earlier[::-1], "anchors": _event_anchors(list(steps))}
    return render(request, "runs/_events_table.html", context)


@require_POST
@login_required
@permission_required("runs.cancel_run", raise_exception=True)
@object_permission("runs.cancel_run", _run_project, "run_id")
def run_cancel(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """Cancel the run (POST ``reason``, optional); a finished run or a reason it cannot keep
    (too long, NUL) gives an error message."""
    try:
        lifecycle.run_cancel(
            run_id=run_id,
            actor=Actor.for_user(request.user),
            reason=request.POST.get("reason", "").strip(),
        )
    except Run.DoesNotExist:
        raise Http404("no such run") from None
    except InvalidInput as exc:
        messages.error(request, f"Cannot cancel: {exc.message}.")
    except TransitionNotAllowed:
        messages.error(request, "This run has already finished: it can no longer be cancelled.")
    except ConcurrentTransition:
        messages.error(request, "The run changed while cancelling it: please try again.")
    else:
        messages.success(request, "Run cancelled.")
    return redirect("run-detail", run_id=run_id)


@require_POST
@login_required
@permission_required("runs.resume_run", raise_exception=True)
@object_permission("runs.resume_run", _run_project, "run_id")
def run_resume(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """Resume a failed run from its failed step; other states give an error message."""
    try:
        lifecycle.run_resume(run_id=run_id, actor=Actor.for_user(request.user))
    except Run.DoesNotExist:
        raise Http404("no such run") from None
    except TransitionNotAllowed:
        messages.error(request, "Only a failed run can be resumed.")
    except ConcurrentTransition:
        messages.error(request, "The run changed while resuming it: please try again.")
    except Conflict as exc:
        messages.error(request, f"Cannot resume: {exc}.")
    else:
        messages.success(request, "Run resumed.")
    return redirect("run-detail", run_id=run_id)


@require_POST
@login_required
@permission_required("runs.add_run", raise_exception=True)
@object_permission("runs.add_run", _run_project, "run_id")
def run_fork(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """Fork a new run from the checkpoint before step ``from_index`` (POST), then show it.

    POST ``args`` (JSON text) replaces that step's arguments when it differs from them;
    ``state_version`` (optional) is the version of the agent's state the new run starts with
    (``runs.control.fork.run_fork``); bad input (not an integer index or version, not JSON,
    arguments failing the tool's schema) gives an error message on the source run's page.
    """
    try:
        from_index = int(request.POST.get("from_index", ""))
    except ValueError:
        messages.error(request, "Cannot fork: the step index is not a number.")
        return redirect("run-detail", run_id=run_id)
    state_version = None
    raw_version = request.POST.get("state_version", "").strip()
    if raw_version:
        if not (raw_version.isascii() and raw_version.isdigit() and int(raw_version) < 2**31):
            messages.error(request, "Cannot fork: the agent state version is not a version.")
            return redirect("run-detail", run_id=run_id)
        state_version = int(raw_version)
    args = None
    raw_args = request.POST.get("args", "").strip()
    if raw_args:
        try:
            args = json.loads(raw_args)
        except json.JSONDecodeError as exc:
            messages.error(request, f"Cannot fork: the arguments are not valid JSON ({exc}).")
            return redirect("run-detail", run_id=run_id)
        original = Step.objects.filter(run_id=run_id, index=from_index).values_list(
            "args", flat=True
        )
        if args == original.first():
            args = None
    try:
        forked = fork.run_fork(
            run_id=run_id,
            actor=Actor.for_user(request.user),
            from_index=from_index,
            args=args,
            state_version=state_version,
        )
    except Run.DoesNotExist:
        raise Http404("no such run") from None
    except InvalidInput as exc:
        messages.error(request, f"Cannot fork: {exc.message}.")
        return redirect("run-detail", run_id=run_id)
    edited = " with edited arguments (they need a reviewer's approval)" if args else ""
    messages.success(request, f"Forked from step #{from_index}{edited}.")
    return redirect("run-detail", run_id=forked.pk)


@require_POST
@login_required
@permission_required("runs.resume_run", raise_exception=True)
@object_permission("runs.resume_run", _run_project, "run_id")
def run_settle(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """Settle a step whose outcome is unknown (``runs.control.settle.step_settle``): POST
    ``step_id``, ``happened`` (``yes`` | ``no``), ``result`` (JSON text, when it happened) and
    ``reason``; anything wrong or refused is a message on the run's page."""
    happened = request.POST.get("happened") == "yes"
    raw_result = request.POST.get("result", "").strip()
    result = None
    if happened and raw_result:
        try:
            result = json.loads(raw_result)
        except ValueError as exc:
            messages.error(request, f"Cannot settle: the result is not JSON ({exc}).")
            return redirect("run-detail", run_id=run_id)
    try:
        settle.step_settle(
            run_id=run_id,
            step_id=int(request.POST.get("step_id", "")),
            actor=Actor.for_user(request.user),
            happened=happened,
            result=result,
            reason=request.POST.get("reason", "").strip(),
        )
    except (ValueError, Step.DoesNotExist):
        messages.error(request, "Cannot settle: no such step in this run.")
    except (InvalidInput, Conflict) as exc:
        messages.error(request, f"Cannot settle: {exc}.")
    else:
        done = "recorded as done; the run goes on" if happened else "will be called again"
        messages.success(request, f"Settled: the call {done}.")
    return redirect("run-detail", run_id=run_id)
