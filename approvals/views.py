"""The reviewers' approvals inbox, its live fragment, a request's page and its context; the
decisions posted from them are in ``approvals.decision_views``."""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required, permission_required
from django.core.paginator import Page, Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from approvals import selectors
from approvals.context_processors import PENDING_COUNT_ATTRIBUTE
from approvals.decision_views import take_draft
from approvals.filters import InboxFilter, place_parameters
from approvals.models import (
    ApprovalDecision,
    ApprovalMark,
    ApprovalRequest,
)
from approvals.transcript import compact_transcript, steps_not_in
from projects.access import Access
from projects.views import object_permission
from runs.selectors import ArgsEdit, args_edits, conversation_before_call, run_conversation
from runs.tools import get_tool
from runs.tools.preview import Preview, tool_preview
from runs.tools.registry import PreviewContext
from runs.views import last_event_id

# Cards are folded to one line until opened, so a page is one screen of lines; 25 a page keep
# its markup (each card's arguments, conversation and last results are in it, for opening
# without a round trip) and rendering bounded; the pager reaches the rest.
INBOX_PER_PAGE = 25
# The inbox shows the results of at most this many steps before the one to decide.
EARLIER_STEPS_SHOWN = 10
_RUN_PLACEHOLDER = uuid.UUID(int=0)
_ID_PLACEHOLDER = 987654321


@dataclass
class InboxItem:
    """A pending approval with what the reviewer needs to judge it: the tool's ``preview``
    of what the call would change (the steps before it and the conversation up to the call
    are loaded when the card's context is opened: ``approval_context``), ``refusal`` (why
    this user may not
    decide it, "" if they may), ``decisions`` (made so far, oldest first), ``own_decision``
    (their approval so far, if any), ``edits`` (people's edits of the call's arguments while
    it waited, oldest first: ``runs.selectors.ArgsEdit``), ``key_args`` (``_key_arguments``),
    ``identical`` (how many pending requests the user may see ask for this very call, this
    one included; 0: not counted), ``mark`` (the user's own snooze and assignment), and the
    paths of the run's page
    (``run_path``), of the decision form (``decide_path``), of the card's context
    (``context_path``), of the request's own page (``detail_path``) and of its marks' form
    (``mark_path``)."""

    approval: ApprovalRequest
    preview: Preview
    refusal: str
    decisions: list[ApprovalDecision]
    own_decision: ApprovalDecision | None
    edits: list[ArgsEdit]
    key_args: list[tuple[str, str]]
    run_path: str
    decide_path: str
    context_path: str
    detail_path: str
    mark_path: str
    identical: int = 0
    mark: ApprovalMark | None = None

    @property
    def forked_from(self) -> dict[str, Any] | None:
        """``{"run": source run id (text), "index": step index}`` when the server forked the
        run (``Run.forked_from``, ``Run.forked_from_index``; never the run's metadata, which
        its client writes) and this is the step the fork started from (where a person may
        have edited the arguments), else None."""
        run = self.approval.run
        if run.forked_from_id is None or run.forked_from_index != self.approval.step.index:
            return None
        return {"run": str(run.forked_from_id), "index": run.forked_from_index}


def _refusal(
    user: Any, access: Access, approval: ApprovalRequest, groups: Callable[[], set[str]]
) -> str:
    """Why ``user`` (in the Django groups named ``groups()``, read only for a policy that
    names deciding groups) may not decide ``approval``, in words for them ("" if they may)."""
    run, step = approval.run, approval.step
    policy = approval.rule
    if run.project_id is None or not access.can(policy.permission, run.project_id):
        role = access.roles().get(run.project_id) if run.project_id is not None else None
        project = run.project.name or run.project.slug
        if role is None:
            return f"You are not a member of project {project}: only its reviewers may decide."
        return f"Your role in project {project} is {role}: only its reviewers may decide."
    if policy.excludes_requester(user=user, run=run, step=step):
        if run.requested_by_id == user.pk:
            return "You requested this run: four-eyes rule, another reviewer must decide."
        if step.requested_by_id == user.pk:
            return "You asked for this step: four-eyes rule, another reviewer must decide."
        return (
            "You edited these arguments, and they need a stricter approval: four-eyes rule, "
            "other reviewers must decide."
        )
    if not policy.deciding_groups(escalated=approval.escalated):
        return ""
    refused = policy.group_refusal(groups=groups(), escalated=approval.escalated)
    return f"You may not decide this yet: {refused}." if refused else ""


def _preview(approval: ApprovalRequest) -> Preview:
    step = approval.step
    context = PreviewContext(
        run_id=str(approval.run_id), step_id=step.pk, project_id=approval.run.project_id
    )
    return tool_preview(step.tool, step.args, context)


# What a request's line shows of its arguments: this many of them, each value cut to this many
# characters.
KEY_ARGS_SHOWN = 3
KEY_VALUE_CHARS = 40


def _short(value: Any) -> str:
    """``value`` (any JSON an agent wrote) in at most ``KEY_VALUE_CHARS`` characters; a list
    or an object is only named with its size (never walked: it may be nested deep)."""
    if isinstance(value, list):
        if len(value) == 1 and isinstance(value[0], str | int | float | bool):
            return _short(value[0])
        return f"[{len(value)} items]"
    if isinstance(value, dict):
        return f"{{{len(value)} keys}}"
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= KEY_VALUE_CHARS else text[: KEY_VALUE_CHARS - 1] + "…"


def _key_arguments(tool_name: str, args: Any) -> list[tuple[str, str]]:
    """The arguments a request's line shows, as ``(name, short value)``: those the tool
    declares (``Tool.key_args``) that the call has, else its first ``KEY_ARGS_SHOWN``."""
    if not isinstance(args, dict):
        return []
    tool = get_tool(tool_name)
    names = [n for n in tool.key_args if n in args] if tool and tool.key_args else list(args)
    return [(str(name)[:KEY_VALUE_CHARS], _short(args[name])) for name in names[:KEY_ARGS_SHOWN]]


def _items(
    request: HttpRequest,
    access: Access,
    approvals: list[ApprovalRequest],
    *,
    every_edit: bool = False,
) -> list[InboxItem]:
    """An ``InboxItem`` for each of ``approvals``, for the user of ``request``; the argument
    edits of every one of them when ``every_edit`` (a decided request's page), else only of
    those a pending request can have."""
    decided = selectors.decisions_by_approval([approval.pk for approval in approvals])
    # A pending request's arguments were edited only by a reviewer who approved them (a
    # decision) or whose edit restarted it under a stricter policy (``edited_by``): only
    # those are looked up (most of an inbox has neither: no query).
    edited = (
        approvals
        if every_edit
        else [a for a in approvals if a.pk in decided or a.rule.edited_by is not None]
    )
    edits = args_edits(
        run_ids=list({approval.run_id for approval in edited}),
        step_ids=[approval.step_id for approval in edited],
    )
    # The user's groups matter only to requests whose policy names deciding groups: read
    # once, when the first of them needs them.
    groups = functools.cache(lambda: set(request.user.groups.values_list("name", flat=True)))
    # One reverse() each for the page, not one a card: the ids put into resolved paths.
    run_path = reverse("run-detail", args=[_RUN_PLACEHOLDER])
    decide_path = reverse("approval-decide", args=[_ID_PLACEHOLDER])
    context_path = reverse("approval-context", args=[_ID_PLACEHOLDER])
    detail_path = reverse("approval-detail", args=[_ID_PLACEHOLDER])
    mark_path = reverse("approval-mark", args=[_ID_PLACEHOLDER])
    items = []
    for approval in approvals:
        decisions = decided.get(approval.pk, [])
        own = f"/{approval.pk}/"
        items.append(
            InboxItem(
                approval=approval,
                preview=_preview(approval),
                refusal=_refusal(request.user, access, approval, groups),
                decisions=decisions,
                own_decision=next((d for d in decisions if d.reviewer_id == request.user.pk), None),
                edits=edits.get(approval.step_id, []),
                key_args=_key_arguments(approval.step.tool, approval.step.args),
                run_path=run_path.replace(str(_RUN_PLACEHOLDER), str(approval.run_id)),
                decide_path=decide_path.replace(f"/{_ID_PLACEHOLDER}/", own),
                context_path=context_path.replace(f"/{_ID_PLACEHOLDER}/", own),
                detail_path=detail_path.replace(f"/{_ID_PLACEHOLDER}/", own),
                mark_path=mark_path.replace(f"/{_ID_PLACEHOLDER}/", own),
            )
        )
    return items


def _inbox_context(request: HttpRequest) -> dict[str, Any]:
    access = Access(request.user)
    pending = access.scope(
        selectors.approval_inbox(), "approvals.view_approvalrequest", "run__project_id"
    )
    facets = selectors.inbox_facets(pending)
    setattr(request, PENDING_COUNT_ATTRIBUTE, facets.total)
    place = place_parameters(request.GET)
    # Signed in (every view of the inbox requires it): the user has an id.
    user_id = int(request.user.pk or 0)
    own_marks = selectors.pending_marks(user_id)
    shown, snoozing = selectors.inbox_shown(
        pending, user_id=user_id, show=place.get("show", ""), marks=own_marks
    )
    inbox_filter = InboxFilter(request.GET or None, queryset=shown)
    filtered = {k: v for k, v in place.items() if k not in ("page", "sort")}
    paginator = Paginator(inbox_filter.qs, INBOX_PER_PAGE)
    if not filtered and not snoozing:
        # Nothing narrows the list: the facets' total is its count (one query fewer).
        paginator.count = facets.total
    page: Page = paginator.get_page(request.GET.get("page"))
    approvals = list(page)
    items = _items(request, access, approvals)
    for item in items:
        step = item.approval.step
        item.identical = facets.identical.get((step.tool, step.args_hash), 0)
        item.mark = own_marks.get(item.approval.pk)
    return {
        "items": items,
        "page": page,
        "filter": inbox_filter,
        "facets": facets,
        "place": urlencode(place),
        "place_without_page": urlencode({k: v for k, v in place.items() if k != "page"}),
        "filtered": bool(filtered),
        "snoozing": snoozing,
        "drafts": {},
    }


@require_GET
@login_required
@permission_required("approvals.view_approvalrequest", raise_exception=True)
def approval_inbox(request: HttpRequest) -> HttpResponse:
    """Pending approval requests of the user's projects, one folded card each (opened by a
    click or the keyboard) with an approve / reject form; filtered, searched, sorted and
    paged by GET parameters (``approvals.filters``)."""
    after = last_event_id()
    context = _inbox_context(request)
    drafts = {item.approval.pk: take_draft(request, item.approval.pk) for item in context["items"]}
    context.update(
        drafts={pk: draft for pk, draft in drafts.items() if draft},
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
    """The inbox's list of requests alone (same GET parameters), for live refreshes."""
    return render(request, "approvals/_inbox_items.html", _inbox_context(request))


def _approval_project(approval_id: int) -> int | None:
    return (
        ApprovalRequest.objects.filter(pk=approval_id)
        .values_list("run__project_id", flat=True)
        .first()
    )


def _call_context(approval: ApprovalRequest) -> dict[str, Any]:
    """What led to ``approval``'s call: the run's goal (``run``), its conversation up to the
    call (``conversation_before_call``) as a compact ``transcript`` (each tool call once,
    beside its result, the call under review last), and of the last
    ``EARLIER_STEPS_SHOWN`` steps before it those whose results the transcript does not show
    (``earlier_steps``; ``earlier_count``: how many there were before the call)."""
    run, step = approval.run, approval.step
    transcript = compact_transcript(
        conversation_before_call(run, step, run_conversation(run_id=run.pk)),
        under_review=step.tool_call_id,
    )
    earlier = selectors.earlier_steps([approval], limit=EARLIER_STEPS_SHOWN).get(approval.pk, [])
    return {
        "run": run,
        "step": step,
        "transcript": transcript,
        "earlier_steps": steps_not_in(transcript, earlier),
        "earlier_shown": len(earlier),
    }


@require_GET
@login_required
@permission_required("approvals.view_approvalrequest", raise_exception=True)
@object_permission("approvals.view_approvalrequest", _approval_project, "approval_id")
def approval_context(request: HttpRequest, approval_id: int) -> HttpResponse:
    """What led to an approval request's call (an HTML fragment, loaded when its card's
    context section is opened): ``_call_context``.

    Raises:
        Http404: no such request, or one in a project the user may not see.
    """
    approval = selectors.approval_list().get(pk=approval_id)
    return render(request, "approvals/_card_context.html", _call_context(approval))


@require_GET
@login_required
@permission_required("approvals.view_approvalrequest", raise_exception=True)
@object_permission("approvals.view_approvalrequest", _approval_project, "approval_id")
def approval_detail(request: HttpRequest, approval_id: int) -> HttpResponse:
    """One approval request on its own page (``/approvals/<id>/``), whatever its status: where
    every link to a request leads (notifications, the run page, the inbox's cards), so a link
    never depends on the inbox's page or filters. It shows what its card shows, with the
    context already open; a pending request the user may decide gets the decision form, and
    what they typed into it before a refused decision fills it again
    (``approvals.decision_views.keep_draft``).

    Raises:
        Http404: no such request, or one in a project the user may not see.
    """
    approval = selectors.approval_list().get(pk=approval_id)
    (item,) = _items(request, Access(request.user), [approval], every_edit=True)
    item.mark = selectors.pending_marks(request.user.pk).get(approval.pk)
    context = {
        **_call_context(approval),
        "item": item,
        "drafts": {approval.pk: take_draft(request, approval.pk)},
        "place": "",
        "nav": "approvals",
    }
    return render(request, "approvals/detail.html", context)
