"""The reviewers' approvals inbox, its live fragment, and the approve / reject form."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from approvals import selectors, services
from approvals.models import ApprovalRequest, ApprovalStatus, Decision
from projects.access import Access
from runs.models import Step
from runs.views import last_event_id

# Each request is a full card (arguments, rationale, conversation, earlier results): 25 a page
# keep the page about 60 kB and its rendering near 25 ms; the pager reaches the rest.
INBOX_PER_PAGE = 25
# The inbox shows the results of at most this many steps before the one to decide.
EARLIER_STEPS_SHOWN = 10


@dataclass
class InboxItem:
    """A pending approval with what the reviewer needs to judge it: the steps before it
    (``earlier_steps``, with their results), whether ``own_run`` (the reviewer requested the
    run, so they may not decide) and ``group_refusal`` (why the reviewer's groups may not
    decide it now: its policy names other approvers, or it has not escalated to them yet;
    empty when they may)."""

    approval: ApprovalRequest
    earlier_steps: list[Step]
    own_run: bool
    group_refusal: str = ""


def _inbox_context(request: HttpRequest) -> dict[str, Any]:
    pending = Access(request.user).scope(
        selectors.approval_inbox(), "approvals.view_approvalrequest", "run__project_id"
    )
    page = Paginator(pending, INBOX_PER_PAGE).get_page(request.GET.get("page"))
    approvals = list(page)
    earlier = selectors.earlier_steps(approvals, limit=EARLIER_STEPS_SHOWN)
    groups = set(request.user.groups.values_list("name", flat=True))
    items = [
        InboxItem(
            approval=approval,
            earlier_steps=earlier.get(approval.pk, []),
            own_run=approval.rule.excludes_requester(
                user=request.user, run=approval.run, step=approval.step
            ),
            group_refusal=approval.rule.group_refusal(groups=groups, escalated=approval.escalated),
        )
        for approval in approvals
    ]
    return {"items": items, "page": page}


@require_GET
@login_required
@permission_required("approvals.view_approvalrequest", raise_exception=True)
def approval_inbox(request: HttpRequest) -> HttpResponse:
    """Pending approval requests of the user's projects, oldest first, each with an approve /
    reject form."""
    after = last_event_id()
    context = _inbox_context(request)
    context.update(
        nav="approvals",
        last_event_id=after,
        ws_path="/ws/approvals/",
        fragment_url=reverse("approval-inbox-fragment"),
    )
    return render(request, "approvals/inbox.html", context)


@require_GET
@login_required
@permission_required("approvals.view_approvalrequest", raise_exception=True)
def approval_inbox_fragment(request: HttpRequest) -> HttpResponse:
    """The inbox's list of requests alone, for live refreshes."""
    return render(request, "approvals/_inbox_items.html", _inbox_context(request))


@require_POST
@login_required
def approval_decide(request: HttpRequest, approval_id: int) -> HttpResponse:
    """Approve or reject (POST ``decision``: approve|reject, ``comment``; to approve with
    edits, ``args``: the arguments as JSON text), then back to the inbox.

    Every refusal of the service (not pending any more, already decided, own run, no reviewer
    permission, bad input) becomes an error message on the inbox; so does a request that does
    not exist or is in a project the user may not see (the same message for both).
    """
    project_id = (
        ApprovalRequest.objects.filter(pk=approval_id).values_list("run__project_id", flat=True)
    ).first()
    if project_id is None or not Access(request.user).can(
        "approvals.view_approvalrequest", project_id
    ):
        messages.error(request, f"Approval request {approval_id} does not exist.")
        return redirect("approval-inbox")
    decision = request.POST.get("decision", "")
    args_text = request.POST.get("args", "")
    args = None
    if decision == Decision.APPROVE and args_text.strip():
        # The editor holds the arguments as shown; unchanged ones are no edit (the service
        # compares them with the step's).
        try:
            args = json.loads(args_text)
        except ValueError as exc:
            messages.error(
                request, f"Could not record your decision: the arguments are not JSON ({exc})."
            )
            return redirect("approval-inbox")
    try:
        approval = services.approval_decide(
            approval_id=approval_id,
            actor=Actor.for_user(request.user),
            decision=decision,
            comment=request.POST.get("comment", "").strip(),
            args=args,
        )
    except (Conflict, PermissionDenied, InvalidInput) as exc:
        messages.error(request, f"Could not record your decision: {exc}.")
    else:
        tool = approval.step.tool
        if decision == Decision.REJECT:
            messages.success(request, f"Rejected {tool}: the run has failed.")
        elif approval.status == ApprovalStatus.APPROVED:
            messages.success(request, f"Approved {tool}: the step is queued and the run continues.")
        else:
            messages.success(request, f"Approval of {tool} recorded: it needs another reviewer.")
    return redirect("approval-inbox")
