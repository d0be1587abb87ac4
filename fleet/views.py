"""Control room pages: the overview's charts and their data, workers and queues with the task
history (and re-sending a failed task), and the Prometheus metrics.

Permissions: the overview needs ``runs.view_run`` in some project and shows only those
projects' runs; the workers page needs ``runs.resume_run`` (operators, admins) in some
project, shows the task history of those projects' runs (superusers: also work of no run)
and lets them re-send a failed task of a run they may resume. ``/metrics`` is fleet-wide:
a bearer token (``AGENTOPS_METRICS_TOKEN``) or a staff user's session.
"""

from __future__ import annotations

import hmac
import logging
import math
import time
import uuid
from typing import Any
from urllib.parse import urlencode

import redis
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from kombu.exceptions import KombuError
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from agentops import celery_app
from agentops.actors import Actor
from agentops.page_errors import page_action
from fleet import broker, selectors, services, tasks
from fleet.metrics import fleet_registry
from fleet.models import TaskRecord, TaskState
from fleet.receivers import TASK_SUBJECTS
from projects.access import Access
from runs.models import Run, Step
from runs.models.prompts import MAX_NAME, MAX_VERSION

logger = logging.getLogger(__name__)

DEFAULT_WINDOW = "1h"
# How often the overview's script asks for fresh figures (seconds).
POLL_SECONDS = 5
TASK_HISTORY_ROWS = 100

_REGISTRY = fleet_registry()


# The longest value of each version filter (characters): ``runs.models.prompts``' limits.
VERSION_LIMITS = {
    "agent_name": MAX_NAME,
    "agent_version": MAX_VERSION,
    "prompt_name": MAX_NAME,
    "prompt_version": MAX_VERSION,
}


def _versions_given(request: HttpRequest) -> dict[str, str]:
    """The version filters of the request (``fleet.selectors.VERSION_FILTERS``), empty ones
    dropped."""
    return {name: request.GET[name] for name in VERSION_LIMITS if request.GET.get(name)}


@require_GET
@login_required
@permission_required("runs.view_run", raise_exception=True)
def overview(request: HttpRequest) -> HttpResponse:
    """The overview page: its charts and its table of runs by agent and prompt version are
    drawn by ``static/js/overview.js`` from ``overview_data``, polled every
    ``POLL_SECONDS``; ``?window=`` picks the span, ``?agent_name=``, ``agent_version``,
    ``prompt_name`` and ``prompt_version`` narrow the runs (checked by ``overview_data``)."""
    window = request.GET.get("window", DEFAULT_WINDOW)
    if window not in selectors.WINDOWS:
        window = DEFAULT_WINDOW
    versions = _versions_given(request)
    return render(
        request,
        "fleet/overview.html",
        {
            "nav": "overview",
            "windows": list(selectors.WINDOWS.values()),
            "window": window,
            "versions": versions,
            "versions_query": urlencode(versions),
            "poll_seconds": POLL_SECONDS,
        },
    )


@require_GET
@login_required
@permission_required("runs.view_run", raise_exception=True)
def overview_data(request: HttpRequest) -> JsonResponse:
    """The overview's figures as JSON (``fleet.selectors.overview``) for ``?window=`` (``1h``
    default, ``24h``, ``7d``), over the runs of the projects the user may see that have the
    ``?agent_name=``, ``agent_version``, ``prompt_name`` and ``prompt_version`` given (exact).

    Answers 400 ``{"detail", "field"}`` for an unknown window or a version filter too long
    or holding NUL, 503 ``{"detail"}`` when the database is not PostgreSQL.
    """
    name = request.GET.get("window", DEFAULT_WINDOW)
    window = selectors.WINDOWS.get(name)
    if window is None:
        allowed = ", ".join(selectors.WINDOWS)
        return JsonResponse(
            {"detail": f"window must be one of {allowed}", "field": "window"}, status=400
        )
    versions = _versions_given(request)
    for field, value in versions.items():
        if len(value) > VERSION_LIMITS[field] or "\x00" in value:
            detail = f"{field} must be at most {VERSION_LIMITS[field]} characters, without NUL"
            return JsonResponse({"detail": detail, "field": field}, status=400)
    project_ids = Access(request.user).project_ids("runs.view_run")
    try:
        data = selectors.overview(
            window=window, project_ids=project_ids, now=timezone.now(), versions=versions
        )
    except selectors.OverviewUnavailable as exc:
        return JsonResponse({"detail": str(exc)}, status=503)
    return JsonResponse(data)


def _active_tasks(workers: list[broker.WorkerState], access: Access) -> list[dict[str, Any]]:
    """The active tasks of ``workers``, their arguments shown only when the task concerns a
    run the user may see (or, for work of no run, to superusers): two queries at most."""
    tasks = [dict(task, worker=worker.name) for worker in workers for task in worker.active]
    run_ids: set[uuid.UUID] = set()
    step_ids: set[int] = set()
    for task in tasks:
        kind = TASK_SUBJECTS.get(task.get("name", ""))
        try:
            if kind == "run":
                task["run_id"] = uuid.UUID(str(task["args"][0]))
                run_ids.add(task["run_id"])
            elif kind == "step":
                task["step_id"] = int(task["args"][0])
                step_ids.add(task["step_id"])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
    step_runs = dict(Step.objects.filter(pk__in=step_ids).values_list("pk", "run_id"))
    run_ids |= set(step_runs.values())
    projects = dict(Run.objects.filter(pk__in=run_ids).values_list("pk", "project_id"))
    for task in tasks:
        run_id = task.get("run_id") or step_runs.get(task.get("step_id", -1))
        task["run_id"] = run_id
        project_id = projects.get(run_id) if run_id else None
        task["visible"] = access.can("runs.view_run", project_id)
    return tasks


def _workers_context(request: HttpRequest) -> dict[str, Any]:
    """What the workers page and its live part show: the queues (read from Redis now), the
    workers and their active tasks from the last report in the cache (never asked here; a
    refresh is sent when the report is older than ``AGENTOPS_WORKERS_REFRESH_SECONDS``) and
    how old it is (seconds), and the problems met, as sentences."""
    access = Access(request.user)
    problems = []
    try:
        queues = broker.queue_states()
    except redis.RedisError as exc:
        queues = []
        problems.append(f"The broker's queues could not be read: {exc}")
    eager = bool(celery_app.conf.task_always_eager)
    report = broker.workers_report()
    now = time.time()
    refresh = settings.AGENTOPS_WORKERS_REFRESH_SECONDS
    # Tasks that run eagerly (no broker) have no workers to ask.
    if (report is None or report.age_seconds(now) >= refresh) and not eager:
        # One refresh in flight for every open page; one that waits too long (busy workers)
        # expires, and the next page poll after the claim sends another.
        claim = refresh + 2 * math.ceil(settings.AGENTOPS_INSPECT_TIMEOUT_SECONDS) + 5
        if broker.workers_report_claim(seconds=claim):
            try:
                tasks.refresh_workers_report.apply_async(expires=claim)
            except (KombuError, OSError, redis.RedisError) as exc:
                problems.append(f"The workers could not be asked: {exc}")
    if report is not None and report.error:
        problems.append(f"The workers could not be asked: {report.error}")
    answered = report.workers if report is not None else []
    return {
        "problems": problems,
        "queues": queues,
        "eager": eager,
        "report_age": None if report is None else report.age_seconds(now),
        "workers": answered,
        "active": _active_tasks(answered, access),
    }


@require_GET
@login_required
@permission_required("runs.resume_run", raise_exception=True)
def workers(request: HttpRequest) -> HttpResponse:
    """Queue depths and ages (Redis), the workers with their active tasks as last reported
    (``_workers_context``; ``static/js/workers.js`` re-fetches that part, ``workers_live``,
    every ``AGENTOPS_WORKERS_REFRESH_SECONDS``) and the task history (``?state=``
    ``failure`` | ``retry`` | ``success`` narrows it). An unreachable broker is said on the
    page; the task history is still shown."""
    access = Access(request.user)
    state = request.GET.get("state", "")
    if state not in TaskState.values:
        state = ""
    history = selectors.task_history(
        project_ids=access.project_ids("runs.view_run"), state=state, limit=TASK_HISTORY_ROWS
    )
    resendable = {
        record.pk
        for record in history
        if record.resendable and access.can("runs.resume_run", record.project_id)
    }
    return render(
        request,
        "fleet/workers.html",
        {
            **_workers_context(request),
            "nav": "workers",
            "poll_seconds": settings.AGENTOPS_WORKERS_REFRESH_SECONDS,
            "history": history,
            "resendable": resendable,
            "state": state,
            "states": TaskState.choices,
        },
    )


@require_GET
@login_required
@permission_required("runs.resume_run", raise_exception=True)
def workers_live(request: HttpRequest) -> HttpResponse:
    """The live part of the workers page (queues, workers, active tasks), an HTML fragment."""
    return render(request, "fleet/_workers_live.html", _workers_context(request))


def _back_to_workers(request: HttpRequest, record_id: int) -> HttpResponse:
    return redirect("fleet-workers")


@require_POST
@login_required
@permission_required("runs.resume_run", raise_exception=True)
def task_resend(request: HttpRequest, record_id: int) -> HttpResponse:
    """Re-send the failed task of history row ``record_id`` (``fleet.services.task_resend``);
    a refusal (it is not a failed task any more, say) is an error message on the workers
    page.

    Raises:
        Http404: no such row, or one of a project the user may not see.
        PermissionDenied: the user may see it but not resume runs there (a viewer), or it is
            work of no run and the user no superuser.
    """
    access = Access(request.user)
    row = TaskRecord.objects.filter(pk=record_id).values("project_id").first()
    if row is None or not access.can("runs.view_run", row["project_id"]):
        raise Http404("no such task")
    if not access.can("runs.resume_run", row["project_id"]):
        raise PermissionDenied("your role does not allow re-sending this task (runs.resume_run)")
    return _resend(request, record_id=record_id)


@page_action("Cannot re-send", _back_to_workers)
def _resend(request: HttpRequest, record_id: int) -> HttpResponse:
    new_id = services.task_resend(record_id=record_id, actor=Actor.for_user(request.user))
    messages.success(request, f"Task re-sent as {new_id}.")
    return _back_to_workers(request, record_id)


def _bearer_token(request: HttpRequest) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """The Prometheus metrics (``fleet.metrics``), in the text exposition format.

    Allowed with ``Authorization: Bearer <AGENTOPS_METRICS_TOKEN>`` (when that setting is not
    empty) or a signed-in staff user's session; otherwise 401 (no or a wrong token, no
    session) or 403 (a signed-in user who is not staff).
    """
    expected = settings.AGENTOPS_METRICS_TOKEN
    given = _bearer_token(request)
    allowed = bool(expected and given and hmac.compare_digest(given.encode(), expected.encode()))
    if not allowed and given is None and request.user.is_authenticated:
        if not request.user.is_staff:
            return HttpResponse("staff only\n", status=403, content_type="text/plain")
        allowed = True
    if not allowed:
        response = HttpResponse("unauthorized\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(generate_latest(_REGISTRY), content_type=CONTENT_TYPE_LATEST)
