"""What an operator does from a run's page: cancel, resume, compensate, fork, settle a step
whose outcome is unknown. Each is a POST that calls one service and returns to a run's page;
a refusal is an error message there (``agentops.page_errors.page_action``)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST
from django_fsm import TransitionNotAllowed

from agentops.actors import Actor
from agentops.page_errors import Refused, page_action
from runs.control import compensation, fork, lifecycle, settle
from runs.models import Step
from runs.state_views import run_view


def _back(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    return redirect("run-detail", run_id=run_id)


def _json_field(request: HttpRequest, name: str, refused: str) -> Any:
    """POST field ``name`` parsed as JSON (None when empty).

    Raises:
        Refused: it is not JSON (``refused`` says what could not be done, and what is not).
    """
    raw = request.POST.get(name, "").strip()
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise Refused(f"{refused} ({exc}).") from None


@require_POST
@run_view("runs.cancel_run")
@page_action(
    "Cannot cancel",
    _back,
    says={TransitionNotAllowed: "This run has already finished: it can no longer be cancelled."},
)
def run_cancel(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """Cancel the run (POST ``reason``, optional); a finished run or a reason it cannot keep
    (too long, NUL) gives an error message."""
    lifecycle.run_cancel(
        run_id=run_id,
        actor=Actor.for_user(request.user),
        reason=request.POST.get("reason", "").strip(),
    )
    messages.success(request, "Run cancelled.")
    return _back(request, run_id)


@require_POST
@run_view("runs.resume_run")
@page_action(
    "Cannot resume", _back, says={TransitionNotAllowed: "Only a failed run can be resumed."}
)
def run_resume(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """Resume a failed run from its failed step; other states give an error message."""
    lifecycle.run_resume(run_id=run_id, actor=Actor.for_user(request.user))
    messages.success(request, "Run resumed.")
    return _back(request, run_id)


@require_POST
@run_view("runs.resume_run")
@page_action("Cannot compensate", _back)
def run_compensate(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """Compensate a failed or cancelled run (``runs.control.compensation.run_compensate``);
    a run that cannot be (another status, compensated already, nothing to undo) gives an
    error message."""
    compensation.run_compensate(run_id=run_id, actor=Actor.for_user(request.user))
    messages.success(request, "Compensating: its compensating steps run last first.")
    return _back(request, run_id)


def _whole_number(text: str, limit: int) -> int | None:
    """``text`` as a whole number below ``limit`` (ASCII digits), else None."""
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() and int(text) < limit else None


@require_POST
@run_view("runs.add_run")
@page_action("Cannot fork", _back)
def run_fork(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """Fork a new run from the checkpoint before step ``from_index`` (POST), then show it.

    POST ``args`` (JSON text; empty: the step's own) replaces that step's arguments when it
    differs from them; ``state_version`` (optional) is the version of the agent's state the
    new run starts with (``runs.control.fork.run_fork``); bad input (not an integer index or
    version, not JSON, arguments failing the tool's schema) gives an error message on the
    source run's page.
    """
    from_index = _whole_number(request.POST.get("from_index", ""), 2**31)
    if from_index is None:
        raise Refused("Cannot fork: the step index is not a number.")
    raw_version = request.POST.get("state_version", "").strip()
    state_version = _whole_number(raw_version, 2**31) if raw_version else None
    if raw_version and state_version is None:
        raise Refused("Cannot fork: the agent state version is not a version.")
    args = _json_field(request, "args", "Cannot fork: the arguments are not valid JSON")
    original = Step.objects.filter(run_id=run_id, index=from_index).values_list("args", flat=True)
    if args is not None and args == original.first():
        args = None
    forked = fork.run_fork(
        run_id=run_id,
        actor=Actor.for_user(request.user),
        from_index=from_index,
        args=args,
        state_version=state_version,
    )
    edited = " with edited arguments (they need a reviewer's approval)" if args else ""
    messages.success(request, f"Forked from step #{from_index}{edited}.")
    return redirect("run-detail", run_id=forked.pk)


@require_POST
@run_view("runs.resume_run")
@page_action(
    "Cannot settle", _back, says={Step.DoesNotExist: "Cannot settle: no such step in this run."}
)
def run_settle(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """Settle a step whose outcome is unknown (``runs.control.settle.step_settle``): POST
    ``step_id``, ``happened`` (``yes`` | ``no``), ``result`` (JSON text, when it happened) and
    ``reason``; anything wrong or refused is a message on the run's page."""
    happened = request.POST.get("happened") == "yes"
    result = (
        _json_field(request, "result", "Cannot settle: the result is not JSON")
        if happened
        else None
    )
    step_id = _whole_number(request.POST.get("step_id", ""), 2**63)
    if step_id is None:
        raise Refused("Cannot settle: no such step in this run.")
    settle.step_settle(
        run_id=run_id,
        step_id=step_id,
        actor=Actor.for_user(request.user),
        happened=happened,
        result=result,
        reason=request.POST.get("reason", "").strip(),
    )
    done = "recorded as done; the run goes on" if happened else "will be called again"
    messages.success(request, f"Settled: the call {done}.")
    return _back(request, run_id)
