"""What a reviewer does with approval requests from the pages: decide one (approve, reject,
respond), decide a selection at once, snooze or assign one to themself. Each is a POST that
calls one service and returns to the inbox at the reviewer's place or to the request's page;
a refusal is an error message there (``agentops.page_errors.page_action``), what the reviewer
typed kept for the form (``keep_draft``)."""

from __future__ import annotations

import json
from datetime import timedelta
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from agentops.actors import Actor
from agentops.errors import InvalidInput
from agentops.page_errors import Refused, page_action
from approvals import marks, services
from approvals.filters import place_parameters
from approvals.models import DECISION_PAST_TENSE, ApprovalRequest, ApprovalStatus, Decision
from projects.access import Access
from runs.models import CLIENT_DRIVEN

# A refused decision keeps what the reviewer typed (its comment and edited arguments) in their
# session, by approval id, until the form is shown again; a draft longer than this (in
# characters) is not kept.
_DRAFTS = "approval_drafts"
MAX_DRAFT = 200_000


def keep_draft(request: HttpRequest, approval_id: int) -> None:
    """Keep the posted ``comment`` and ``args`` text of a refused decision on ``approval_id``
    for the next showing of its form (``take_draft``)."""
    # The arguments only count in an approval (a rejection ignores the editor).
    args = request.POST.get("args", "") if request.POST.get("decision") == Decision.APPROVE else ""
    draft = {"comment": request.POST.get("comment", ""), "args": args}
    if len(draft["comment"]) + len(draft["args"]) > MAX_DRAFT:
        return
    drafts = request.session.get(_DRAFTS, {})
    drafts[str(approval_id)] = draft
    request.session[_DRAFTS] = drafts


def take_draft(request: HttpRequest, approval_id: int) -> dict[str, str]:
    """The draft kept for ``approval_id`` (``{"comment": text, "args": text}``), removed from
    the session; ``{}`` when none is."""
    drafts = request.session.get(_DRAFTS)
    if not drafts or str(approval_id) not in drafts:
        return {}
    draft: dict[str, str] = drafts.pop(str(approval_id))
    request.session[_DRAFTS] = drafts
    return draft


def _back_to_place(request: HttpRequest, focus: str = "") -> HttpResponseRedirect:
    """The inbox at the reviewer's place: the page, filters and sort the form was posted from
    (``place``, only known parameters kept), with ``focus`` (an approval id) as the card to
    focus."""
    place = request.POST.get("place", "")
    query = place_parameters(QueryDict(place) if len(place) <= 2000 else {})
    url = reverse("approval-inbox")
    if query:
        url += "?" + urlencode(query)
    if focus.isdigit():
        url += f"#approval-{focus}"
    return HttpResponseRedirect(url)


def _back(request: HttpRequest, approval_id: int, focus: str) -> HttpResponseRedirect:
    """Where a decision on ``approval_id`` returns: the request's own page when it was made
    there (POST ``back``: ``request``), else the inbox at the reviewer's place, ``focus``
    (an approval id) as the card to focus."""
    if request.POST.get("back") == "request":
        return HttpResponseRedirect(reverse("approval-detail", args=[approval_id]))
    return _back_to_place(request, focus)


def _refused(request: HttpRequest, approval_id: int) -> HttpResponseRedirect:
    """Where a refused decision on ``approval_id`` returns, what the reviewer typed kept:
    the request (its card focused and opened again, or its page)."""
    keep_draft(request, approval_id)
    return _back(request, approval_id, str(approval_id))


@require_POST
@login_required
@page_action("Could not record your decision", _refused)
def approval_decide(request: HttpRequest, approval_id: int) -> HttpResponse:
    """Approve, reject or respond (POST ``decision``: approve|reject|respond, ``comment``:
    required to reject, and the answer for the agent to respond;
    to approve with edits, ``args``: the arguments as JSON text), then back to the inbox at
    the reviewer's place (``place``: the inbox's query string; ``next``: the id of the card to
    focus after a decision), or to the request's own page (``back``: ``request``).

    Every refusal of the service (not pending any more, already decided, own run, no reviewer
    permission, bad input) and a rejection without a reason become an error message on the
    request (its card focused and opened again, or its page), what the reviewer typed kept
    in the form (``keep_draft``); a request that does not exist or is in a project the user
    may not see gets the same message, on the inbox.
    """
    project_id = (
        ApprovalRequest.objects.filter(pk=approval_id).values_list("run__project_id", flat=True)
    ).first()
    if project_id is None or not Access(request.user).can(
        "approvals.view_approvalrequest", project_id
    ):
        messages.error(request, f"Approval request {approval_id} does not exist.")
        return _back_to_place(request)
    decision = request.POST.get("decision", "")
    comment = request.POST.get("comment", "").strip()
    if decision == Decision.REJECT and not comment:
        raise Refused(
            "Could not record your rejection: give a reason (the agent and the audit log "
            "keep it). Nothing was changed."
        )
    if decision == Decision.RESPOND and not comment:
        raise Refused(
            "Could not send your response: write it in the comment (the agent gets it as the "
            "call's outcome). Nothing was changed."
        )
    args_text = request.POST.get("args", "")
    args = None
    if decision == Decision.APPROVE and args_text.strip():
        # The editor holds the arguments as shown; unchanged ones are no edit (the service
        # compares them with the step's).
        try:
            args = json.loads(args_text)
        except ValueError as exc:
            raise Refused(
                f"Could not record your decision: the arguments are not JSON ({exc})."
            ) from None
    approval = services.approval_decide(
        approval_id=approval_id,
        actor=Actor.for_user(request.user),
        decision=decision,
        comment=comment,
        args=args,
    )
    tool = approval.step.tool
    if decision == Decision.RESPOND:
        messages.success(
            request,
            f"Responded to {tool}: the call is refused and the agent gets your answer"
            + (
                " as its outcome."
                if approval.run.agent in CLIENT_DRIVEN
                else "; the run has failed."
            ),
        )
    elif decision == Decision.REJECT:
        if approval.run.agent in CLIENT_DRIVEN:
            messages.success(
                request, f"Rejected {tool}: the agent gets your reason as its outcome."
            )
        else:
            messages.success(request, f"Rejected {tool}: the run has failed.")
    elif approval.status == ApprovalStatus.APPROVED:
        messages.success(request, f"Approved {tool}: the step is queued and the run continues.")
    elif approval.rule.edited_by == request.user.pk:
        needed = approval.required_approvals
        messages.warning(
            request,
            f"Your edit of {tool}'s arguments needs a stricter approval ({approval.risk} risk, "
            f"{needed} approval{'s' if needed != 1 else ''}): the request starts over, your "
            "approval does not count, and other reviewers must decide.",
        )
    else:
        messages.success(request, f"Approval of {tool} recorded: it needs another reviewer.")
    return _back(request, approval_id, request.POST.get("next", ""))


def _is_id(value: str) -> bool:
    """Whether ``value`` is an approval id's text (ASCII digits, at most 18)."""
    return value.isascii() and value.isdigit() and len(value) <= 18


@require_POST
@login_required
@page_action("Could not record your decision on the selection", _back_to_place)
def approval_decide_bulk(request: HttpRequest) -> HttpResponse:
    """One decision on a selection of requests (POST ``ids``: approval ids, repeated;
    ``decision``: approve|reject|respond; ``comment``: required to reject or respond), each
    through the same service and rules as a single decision
    (``services.approval_decide_many``), then back to the inbox at the reviewer's place
    (``place``). What was decided and each refusal, by request, become messages; ids that are
    not numbers, unknown, or of a project the user may not see are refused as "does not
    exist", and a missing reason refuses the whole selection (nothing changes).
    """
    raw = request.POST.getlist("ids")
    ids = [int(value) for value in raw if _is_id(value)]
    visible = set(
        Access(request.user)
        .scope(
            ApprovalRequest.objects.filter(pk__in=ids),
            "approvals.view_approvalrequest",
            "run__project_id",
        )
        .values_list("pk", flat=True)
    )
    decision = request.POST.get("decision", "")
    comment = request.POST.get("comment", "").strip()
    if decision in (Decision.REJECT, Decision.RESPOND) and not comment:
        raise Refused(
            "Could not record your decision on the selection: give a reason (or the answer "
            "to send). Nothing was changed."
        )
    hidden = len(raw) - sum(1 for value in raw if _is_id(value) and int(value) in visible)
    if hidden:
        messages.error(request, f"{hidden} of the selected requests do not exist.")
    chosen = [pk for pk in ids if pk in visible]
    if hidden and not chosen:
        return _back_to_place(request)
    outcome = services.approval_decide_many(
        approval_ids=chosen,
        actor=Actor.for_user(request.user),
        decision=decision,
        comment=comment,
    )
    if outcome.decided:
        verb = DECISION_PAST_TENSE[decision].capitalize()
        count = len(outcome.decided)
        messages.success(request, f"{verb} {count} request{'s' if count != 1 else ''}.")
    for approval_id, why in outcome.refused.items():
        messages.error(request, f"Request #{approval_id} was not decided: {why}.")
    return _back_to_place(request)


# The snoozes a reviewer may choose, in hours.
SNOOZE_HOURS = (1, 4, 24)


def _after_mark(request: HttpRequest, approval_id: int) -> HttpResponseRedirect:
    """Where a change of marks returns: the request's page when it was made there (POST
    ``back``: ``request``), else the inbox at the reviewer's place."""
    if request.POST.get("back") == "request":
        return HttpResponseRedirect(reverse("approval-detail", args=[approval_id]))
    return _back_to_place(request)


@require_POST
@login_required
@permission_required("approvals.view_approvalrequest", raise_exception=True)
@page_action(
    "Could not change your marks",
    _after_mark,
    says={ApprovalRequest.DoesNotExist: "Approval request {approval_id} does not exist."},
)
def approval_mark(request: HttpRequest, approval_id: int) -> HttpResponse:
    """Change the user's own marks on a pending request (POST ``action``: ``snooze`` with
    ``hours``, one of ``SNOOZE_HOURS``; ``unsnooze``; ``assign``; ``unassign``) through
    ``approvals.marks``, then back to where it was posted from (``back``, ``place`` as for a
    decision). A refusal (not pending, unknown or another project's request, a bad action)
    is an error message and changes nothing."""
    action = request.POST.get("action", "")
    actor = Actor.for_user(request.user)
    if action == "snooze":
        hours = request.POST.get("hours", "")
        if hours not in {str(h) for h in SNOOZE_HOURS}:
            raise InvalidInput(f"snooze for one of {SNOOZE_HOURS} hours", field="hours")
        until = timezone.now() + timedelta(hours=int(hours))
        marks.approval_snooze(approval_id=approval_id, actor=actor, until=until)
        messages.success(request, f"Snoozed request #{approval_id} for {hours} h.")
    elif action == "unsnooze":
        marks.approval_snooze(approval_id=approval_id, actor=actor, until=None)
        messages.success(request, f"Request #{approval_id} is back in your inbox.")
    elif action in ("assign", "unassign"):
        marks.approval_assign(approval_id=approval_id, actor=actor, assigned=action == "assign")
        done = "assigned to you" if action == "assign" else "no longer assigned to you"
        messages.success(request, f"Request #{approval_id} is {done}.")
    else:
        raise InvalidInput("unknown action", field="action")
    return _after_mark(request, approval_id)
