"""Run pages: a run's page (header, timeline, steps, agent state, conversation, artifacts,
audit events), its live fragment, and a folded step's body (the runs list:
``runs.list_views``).

Each page renders its changing part from one fragment template; the page's script re-fetches
that fragment (``*-fragment`` URLs) whenever its WebSocket reports an event. What a run's page
loads when a section is opened is in ``runs.state_views``; its actions (cancel, resume, fork,
settle) in ``runs.action_views``.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Count, Window, prefetch_related_objects
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from artifacts.selectors import run_artifacts
from audit.selectors import event_list
from audit.streams import stream_head
from runs import run_page, selectors
from runs.control import compensation
from runs.models import Run, RunStatus, Step
from runs.state_views import (
    EVENTS_SHOWN,
    TIMELINE_EVENTS,
    event_anchors,
    paths_by,
    run_view,
    versions_context,
)
from runs.statuses import StepStatus

# A run's page shows the latest messages of its conversation (the API pages through all).
MESSAGES_SHOWN = 100
# Steps whose "Attempts" section opens with the run page, its attempts in it.
_RETRIED = frozenset({StepStatus.FAILED, StepStatus.WAITING_RETRY})
_PATH_PLACEHOLDER = uuid.UUID(int=0)


def last_event_id(*, run_id: uuid.UUID | None = None) -> int:
    """The cursor of the live stream (of one run, when given) as the log is now
    (``audit.streams.stream_head``: an event id; 0 when there is none).

    Pages read it before their data and hand it to their WebSocket as ``?after=``, so an event
    committed while the page renders is replayed rather than lost.
    """
    return stream_head(run_id=run_id)


def _step_bodies(run: Run, steps: list[Step]) -> dict[str, Any]:
    """What the bodies of a run's ``steps`` (whole rows) show: their argument edits, attempts
    (of failed steps and steps waiting for a retry: their section opens with them), state
    changes, and the paths of their folded sections."""
    indexes = [step.index for step in steps]
    attempts = selectors.step_attempts(
        step_ids=[step.pk for step in steps if step.status in _RETRIED]
    )
    return {
        "args_edits": selectors.args_edits(run_ids=[run.pk], step_ids=[step.pk for step in steps]),
        "state_changes": run_page.state_change_counts(run_id=run.pk, indexes=set(indexes)),
        # The steps the agent wrote its own state for (their diffs show what it wrote).
        "agent_state_steps": selectors.state_written_steps(run_id=run.pk),
        "artifacts": run_artifacts(run_id=run.pk),
        "state_paths": paths_by("run-step-state", [run.pk], indexes),
        "attempt_paths": paths_by("run-step-attempts", [run.pk], indexes),
        "attempts_by_step": attempts,
    }


def _run(run_id: uuid.UUID) -> Run:
    try:
        return selectors.run_list().select_related("session").get(pk=run_id)
    except Run.DoesNotExist:
        raise Http404("no such run") from None


def _fork_until(steps: list[Step]) -> int:
    """The last step a fork may start at: one whose predecessors all succeeded."""
    return next(
        (i for i, step in enumerate(steps) if step.status != StepStatus.SUCCEEDED), len(steps)
    )


def _run_detail_context(run_id: uuid.UUID) -> dict[str, Any]:
    run = _run(run_id)
    shown = run_page.page_steps(run_id=run.pk)
    steps = shown.steps
    folded = len(steps) > run_page.STEPS_OPEN
    timeline = None if folded else run_page.timeline(steps=steps, run_id=run.pk, now=timezone.now())
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
        **_step_bodies(run, [step for step in steps if step.pk in shown.open_ids]),
        "open_ids": shown.open_ids,
        "folded": folded,
        "step_paths": paths_by("run-step", [run.pk], [step.index for step in steps]),
        # A long run's timeline is loaded when opened (run_timeline); a short run's drawn.
        "timeline": timeline,
        "timeline_total": (
            run_page.timeline_total(run_id=run.pk, steps=len(steps))
            if timeline is None
            else timeline.rows_total
        ),
        "anchors": event_anchors(step_refs),
        "steps": steps,
        "compensations": run_page.compensations(steps),
        # What the compensate button would undo (a failed or cancelled run not compensated).
        "compensable": (
            len(compensation.compensable_steps(run))
            if run.status in (RunStatus.FAILED, RunStatus.CANCELLED) and not run.compensating
            else 0
        ),
        # The status filter's choices: the statuses the run's steps are in, by value.
        "statuses_present": {step.status: step.status_info.label for step in steps},
        "steps_done": sum(
            step.status == StepStatus.SUCCEEDED and not step.tool_error for step in steps
        ),
        "tool_errors": sum(step.tool_error for step in steps),
        "fork_until": _fork_until(steps),
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
        **versions_context({"run_id": run.pk}, ("run-state-version", "run-state-versions"), None),
    }


@require_GET
@run_view()
def run_detail(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """A run's page: header (with the run it was forked from and its forks), a timeline of
    its model turns and tool calls, its steps (a long run's folded: ``runs.run_page``) with
    attempts, approvals and the state before and after each, one fork form, the agent's
    state, conversation, audit events (linked to their step or approval).

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
@run_view()
def run_detail_fragment(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """The changing part of a run's timeline alone, for live refreshes."""
    return render(request, "runs/_run_body.html", _run_detail_context(run_id))


@require_GET
@run_view()
def run_step(request: HttpRequest, run_id: uuid.UUID, index: int) -> HttpResponse:
    """The body of step ``index`` of the run (an HTML fragment, loaded when a folded step of a
    long run is opened): its rationale, arguments, result or error, approval, attempts and
    state changes, as an open step shows them.

    Raises:
        Http404: the run has no such step.
    """
    run = _run(run_id)
    found = Step.objects.filter(run_id=run_id, index=index).values_list("pk", flat=True)
    steps = selectors.run_page_steps(run_id=run_id, ids=list(found))
    if not steps:
        raise Http404("no such step")
    step = steps[0]
    prefetch_related_objects(steps, "approval__decisions")
    fork_until = _fork_until(
        list(Step.objects.filter(run_id=run_id, index__lte=index).order_by("index").only("status"))
    )
    context = {"run": run, "step": step, "fork_until": fork_until, **_step_bodies(run, steps)}
    return render(request, "runs/_step_body.html", context)


@require_GET
@run_view()
def run_timeline(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """The bars of the run's timeline (``runs.run_page.timeline``), an HTML fragment loaded
    when a long run's timeline is opened.

    Raises:
        Http404: unknown run.
    """
    run = _run(run_id)
    steps = selectors.run_page_steps(run_id=run.pk, defer=run_page.BODY_FIELDS)
    timeline = run_page.timeline(steps=steps, run_id=run.pk, now=timezone.now())
    return render(request, "runs/_timeline_rows.html", {"timeline": timeline})
