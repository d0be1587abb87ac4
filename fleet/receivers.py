"""Celery signals that keep the task history (``TaskRecord``) and stamp messages for queue ages.

Connected in every process by ``FleetConfig.ready``; they act only in workers:

- ``before_task_publish`` adds a ``sent_at`` header (Unix time, seconds) to every message, so
  the age of the oldest message waiting in a queue can be read from the broker
  (``fleet.broker``): Celery's messages carry no send time of their own.
- ``task_prerun`` notes when a task starts, in this process's memory (no database;
  ``task_postrun`` forgets it);
- ``task_success``, ``task_failure`` and ``task_retry`` write one row each, with the run the
  task concerned (its argument, a run or step id, by ``TASK_SUBJECTS``) and that run's
  project. A task that executes many steps still costs one row.

``AGENTOPS_TASK_HISTORY`` chooses what is recorded: ``all`` (default), ``failures`` (failures
and retries only: no write for a task that succeeded) or ``off``.

Recording never breaks a task: a failed write (the database is down, a connection was
terminated) is logged and dropped; the task's own outcome stands. Eager tasks, run inline by
the caller inside its request or test, are not recorded: they are not a worker's work, and
writing inside the caller's transaction could abort it.
"""

from __future__ import annotations

import json
import logging
import socket
import time
import uuid
from datetime import datetime
from typing import Any

from celery.signals import (
    before_task_publish,
    task_failure,
    task_postrun,
    task_prerun,
    task_retry,
    task_success,
)
from django.conf import settings
from django.utils import timezone

from fleet.models import TaskRecord, TaskState
from runs.models import Run, Step

logger = logging.getLogger(__name__)

# Arguments longer than this (JSON, bytes) are not kept for re-sending; the summary still is.
MAX_CALL_BYTES = 4096
SUMMARY_CHARS = 200
TRACEBACK_CHARS = 8000
# What the first argument of a task names, to find the run it concerns.
TASK_SUBJECTS = {
    "runs.advance_run": "run",
    "runs.execute_step": "step",
    "runs.retry_step": "step",
}

# task id → (wall-clock start, monotonic start), for tasks running in this process.
_started: dict[str, tuple[datetime, float]] = {}


def _subject(name: str, args: Any) -> tuple[str | None, Any]:
    """(``"run"`` | ``"step"`` | None, the id) of the run or step the task's first argument
    names, checked to be a UUID or an integer so the lookup cannot fail on a bad value."""
    kind = TASK_SUBJECTS.get(name)
    if kind is None or not isinstance(args, list | tuple) or not args:
        return None, None
    try:
        value: Any = str(uuid.UUID(str(args[0]))) if kind == "run" else int(args[0])
    except (TypeError, ValueError):
        return None, None
    return kind, value


def _call(args: Any, kwargs: Any) -> tuple[dict[str, Any] | None, str]:
    """(the arguments as kept for re-sending, or None; their summary for display)."""
    args = list(args or ())
    kwargs = dict(kwargs or {})
    summary = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
    if len(summary) > SUMMARY_CHARS:
        summary = summary[: SUMMARY_CHARS - 1] + "…"
    try:
        text = json.dumps({"args": args, "kwargs": kwargs})
    except (TypeError, ValueError):
        return None, summary
    if len(text.encode()) > MAX_CALL_BYTES:
        return None, summary
    return {"args": args, "kwargs": kwargs}, summary


def record_task(
    *,
    task_id: str,
    name: str,
    state: str,
    args: Any,
    kwargs: Any,
    request: Any = None,
    exception: BaseException | str | None = None,
    traceback: str = "",
) -> None:
    """Write the history row of the task execution ``task_id`` that ended in ``state`` (a
    ``TaskState``), with the arguments it was sent with; ``request`` is its Celery request
    (worker, queue, retries) when known; nothing when ``AGENTOPS_TASK_HISTORY`` leaves that
    outcome out. Never raises: a failure is logged."""
    began = _started.pop(task_id, None)
    wanted = settings.AGENTOPS_TASK_HISTORY
    if wanted == "off" or (wanted == "failures" and state == TaskState.SUCCESS):
        return
    try:
        _insert(task_id, name, state, args, kwargs, request, exception, traceback, began)
    except Exception:
        logger.exception("could not record the outcome of task %s (%s)", task_id, name)


def _insert(
    task_id: str,
    name: str,
    state: str,
    args: Any,
    kwargs: Any,
    request: Any,
    exception: BaseException | str | None,
    traceback: str,
    began: tuple[datetime, float] | None,
) -> None:
    finished_at = timezone.now()
    started_at, runtime_ms = finished_at, 0
    if began is not None:
        started_at = began[0]
        runtime_ms = int((time.monotonic() - began[1]) * 1000)
    call, summary = _call(args, kwargs)
    if isinstance(exception, BaseException):
        exception = f"{type(exception).__name__}: {exception}"
    exception = _text(exception or "")[:TRACEBACK_CHARS]
    traceback = _text(traceback or "")[-TRACEBACK_CHARS:]
    delivery = getattr(request, "delivery_info", None) or {}
    TaskRecord.objects.create(
        task_id=task_id,
        name=name[:255],
        call=call,
        args_summary=_text(summary),
        state=state,
        worker=(getattr(request, "hostname", None) or socket.gethostname())[:255],
        queue=str(delivery.get("routing_key") or "")[:255],
        started_at=started_at,
        finished_at=finished_at,
        runtime_ms=runtime_ms,
        retries=int(getattr(request, "retries", 0) or 0),
        exception=exception,
        traceback=traceback,
        **_run_of(name, args),
    )


def _run_of(name: str, args: Any) -> dict[str, Any]:
    """``{"run_id", "project_id"}`` of the run the task's first argument names (directly or
    through one of its steps); both None when it names none or no such row exists."""
    kind, subject_id = _subject(name, args)
    found = None
    if kind == "run":
        found = Run.objects.filter(pk=subject_id).values_list("pk", "project_id").first()
    elif kind == "step":
        found = Step.objects.filter(pk=subject_id).values_list("run_id", "run__project_id").first()
    run_id, project_id = found or (None, None)
    return {"run_id": run_id, "project_id": project_id}


def _text(value: str) -> str:
    # PostgreSQL's text cannot hold NUL.
    return value.replace("\x00", "\ufffd")


def _eager(request: Any) -> bool:
    return bool(getattr(request, "is_eager", False))


@before_task_publish.connect
def stamp_sent_at(headers: dict[str, Any] | None = None, **kwargs: Any) -> None:
    """Add ``sent_at`` (Unix time, seconds) to the headers of every message sent."""
    if headers is not None:
        headers.setdefault("sent_at", time.time())


@task_prerun.connect
def note_start(task_id: str | None = None, task: Any = None, **kwargs: Any) -> None:
    """Remember when the task ``task_id`` started (memory only)."""
    if task_id and task is not None and not _eager(task.request):
        _started[task_id] = (timezone.now(), time.monotonic())


@task_postrun.connect
def forget_start(task_id: str | None = None, **kwargs: Any) -> None:
    """Drop the start of a task that ended without a recorded outcome (Celery's ``Ignore``,
    a rejected message), so the memory of starts does not grow."""
    if task_id:
        _started.pop(task_id, None)


@task_success.connect
def record_success(sender: Any = None, **kwargs: Any) -> None:
    """Record a task that returned."""
    request = sender.request
    if _eager(request):
        return
    record_task(
        task_id=request.id,
        name=sender.name,
        state=TaskState.SUCCESS,
        args=request.args,
        kwargs=request.kwargs,
        request=request,
    )


@task_failure.connect
def record_failure(
    sender: Any = None,
    task_id: str | None = None,
    exception: BaseException | None = None,
    args: Any = None,
    kwargs: Any = None,
    einfo: Any = None,
    **extra: Any,
) -> None:
    """Record a task that raised (or hit its hard time limit), with its exception."""
    request = getattr(sender, "request", None)
    if _eager(request) or task_id is None:
        return
    # A hard time limit is signalled by the worker's main process, whose current request is
    # not this task's.
    same = getattr(request, "id", None) == task_id
    record_task(
        task_id=task_id,
        name=sender.name,
        state=TaskState.FAILURE,
        args=args,
        kwargs=kwargs,
        request=request if same else None,
        exception=exception,
        traceback=str(getattr(einfo, "traceback", "") or ""),
    )


@task_retry.connect
def record_retry(
    sender: Any = None, request: Any = None, reason: Any = None, einfo: Any = None, **extra: Any
) -> None:
    """Record a task that asked to be retried (Celery's ``Retry``), with the reason."""
    if request is None or _eager(request):
        return
    record_task(
        task_id=request.id,
        name=sender.name,
        state=TaskState.RETRY,
        args=request.args,
        kwargs=request.kwargs,
        request=request,
        exception=str(reason),
        traceback=str(getattr(einfo, "traceback", "") or ""),
    )
