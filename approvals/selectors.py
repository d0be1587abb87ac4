"""Reads of approval requests shared by the API, the inbox page and the live stream."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Count, Exists, F, OuterRef, Prefetch, QuerySet, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from approvals.models import ApprovalDecision, ApprovalMark, ApprovalRequest, ApprovalStatus
from approvals.queries import pending_count_sql
from runs.models import Risk, Step


def approval_list(*, status: str | None = None) -> QuerySet[ApprovalRequest]:
    """Approval requests, oldest first (the reviewer's queue order), with their step, run and
    decisions loaded (and the run's project); optionally only those with ``status``."""
    qs = (
        ApprovalRequest.objects.select_related("step", "run", "run__requested_by", "run__project")
        .prefetch_related(
            Prefetch("decisions", queryset=ApprovalDecision.objects.order_by("created_at"))
        )
        .order_by("created_at", "id")
    )
    if status:
        qs = qs.filter(status=status)
    return qs


# What the inbox's cards never show of a request's run and step, left unread: JSON documents
# (a run's state can be large) the card's context section loads when opened
# (``approval_context``). A step's result and error are read: a pending step has neither,
# but for one whose result failed a validator and waits with it, which its card shows.
_INBOX_UNREAD = (
    "run__input",
    "run__state",
    "run__error",
    "step__args_schema",
    "step__budget_crossing",
    "step__gate_params",
    "step__recorded_result",
    "step__usage",
)


def approval_inbox() -> QuerySet[ApprovalRequest]:
    """The pending approval requests a reviewer should decide, oldest first, with their step,
    run (its requester and project) joined, without the run's and step's JSON documents the
    inbox does not show (reading one costs a query); their decisions are not loaded (a page of
    them reads them with ``decisions_by_approval``)."""
    return approval_list(status="pending").prefetch_related(None).defer(*_INBOX_UNREAD)


def pending_count(*, project_ids: list[int] | None) -> int:
    """How many approval requests are pending in the projects ``project_ids`` (None: in every
    project, and those of no project). Every page's navigation shows this count: one
    statement, ``approvals.queries.pending_count_sql`` (the ORM's query, built, costs several
    times PostgreSQL's answer)."""
    if project_ids == []:
        return 0
    return pending_count_sql(project_ids=project_ids)


def decisions_by_approval(approval_ids: list[int]) -> dict[int, list[ApprovalDecision]]:
    """The decisions on each of ``approval_ids``, oldest first, by approval id (one without
    any is absent). One query, grouped here: a prefetch would build a related manager and a
    queryset for every request of the page."""
    found: dict[int, list[ApprovalDecision]] = defaultdict(list)
    rows = ApprovalDecision.objects.filter(approval_id__in=approval_ids)
    for decision in rows.order_by("approval_id", "created_at", "id"):
        found[decision.approval_id].append(decision)
    return dict(found)


def earlier_steps(approvals: list[ApprovalRequest], *, limit: int) -> dict[int, list[Step]]:
    """The last ``limit`` steps before each approval's step in its run, in index order, keyed by
    approval id: what a reviewer reads before deciding. One query, whatever the runs' lengths."""
    if not approvals:
        return {}
    steps = (
        Step.objects.filter(
            run__approvals__in=[a.pk for a in approvals],
            index__lt=F("run__approvals__step__index"),
        )
        .annotate(
            approval_id=F("run__approvals__id"),
            newest_first=Window(
                RowNumber(), partition_by=F("run__approvals__id"), order_by=F("index").desc()
            ),
        )
        .filter(newest_first__lte=limit)
        .order_by("index")
    )
    found: dict[int, list[Step]] = defaultdict(list)
    for step in steps:
        found[step.approval_id].append(step)
    return found


@dataclass(frozen=True)
class InboxFacets:
    """What the inbox's filters offer, from the pending requests a user may see: ``total``
    requests, the ``tools`` and ``projects`` (``(id, name)``) they belong to, by name, how
    many there are of each tool (``tool_counts``) and each risk (``risk_counts``, riskiest
    first), and of each call (``identical``: by ``(tool, Step.args_hash)``, how many ask for
    the same tool with the same arguments)."""

    total: int
    tools: list[str]
    projects: list[tuple[int, str]]
    tool_counts: dict[str, int]
    risk_counts: dict[str, int]
    identical: dict[tuple[str, str], int]


def inbox_facets(pending: QuerySet[ApprovalRequest]) -> InboxFacets:
    """The ``InboxFacets`` of ``pending`` (pending requests, already scoped to what the user
    may see). One query, one row a distinct call (with its project and risk): a page's
    identical counts come with the facets rather than from a query of their own (benchmarks:
    one statement fewer an inbox page)."""
    rows = (
        pending.order_by()
        .values_list(
            "step__tool", "step__args_hash", "run__project_id", "run__project__name", "risk"
        )
        .annotate(n=Count("id"))
    )
    total, projects = 0, {}
    tools: dict[str, int] = defaultdict(int)
    risks: dict[str, int] = defaultdict(int)
    identical: dict[tuple[str, str], int] = defaultdict(int)
    for tool, args_hash, project_id, project_name, risk, n in rows:
        total += n
        tools[tool] += n
        risks[risk] += n
        identical[(tool, args_hash)] += n
        projects[project_id] = project_name
    return InboxFacets(
        total=total,
        tools=sorted(tools),
        projects=sorted(projects.items(), key=lambda p: p[1]),
        tool_counts=dict(tools),
        risk_counts={r: risks[r] for r in reversed(Risk.values) if risks.get(r)},
        identical=dict(identical),
    )


def inbox_shown(
    pending: QuerySet[ApprovalRequest],
    *,
    user_id: int,
    show: str,
    marks: dict[int, ApprovalMark],
) -> tuple[QuerySet[ApprovalRequest], bool]:
    """Which of ``pending`` the inbox of user ``user_id`` lists, by ``show``: ``""`` those
    they have not snoozed (until a time still to come), ``mine`` those of them assigned to
    them, ``snoozed`` only those they snoozed; ``marks`` are their marks (``pending_marks``).
    Also whether any request is snoozed by them now (then the list is not all of
    ``pending``). No query of its own."""
    now = timezone.now()
    snoozing = any(m.snoozed_until and m.snoozed_until > now for m in marks.values())
    snoozed = ApprovalMark.objects.filter(
        user_id=user_id, approval_id=OuterRef("pk"), snoozed_until__gt=now
    )
    if show == "snoozed":
        return pending.filter(Exists(snoozed)), True
    shown = pending.exclude(Exists(snoozed)) if snoozing else pending
    if show == "mine":
        mine = ApprovalMark.objects.filter(
            user_id=user_id, approval_id=OuterRef("pk"), assigned_at__isnull=False
        )
        shown = shown.filter(Exists(mine))
    return shown, snoozing


def pending_marks(user_id: int | None) -> dict[int, ApprovalMark]:
    """User ``user_id``'s marks on pending requests, by approval id (None, no user: none).
    One query (a reviewer marks a few requests)."""
    if user_id is None:
        return {}
    rows = ApprovalMark.objects.filter(user_id=user_id, approval__status=ApprovalStatus.PENDING)
    return {mark.approval_id: mark for mark in rows}
