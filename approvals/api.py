"""REST API of approval requests: the reviewers' queue and their decisions (``/api/v1/``).

Thin views: parse, call one service or selector, render; domain errors become status codes in
``agentops.api.exception_handler``.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db.models import QuerySet
from django_filters import rest_framework as filters
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from agentops.api import ErrorSerializer, OldestFirstPagination, StrictFilterSet, actor_for
from approvals import marks, selectors, services
from approvals.models import ApprovalMark, ApprovalRequest, ApprovalStatus, Decision
from approvals.serializers import (
    ApprovalSerializer,
    AssignSerializer,
    BulkDecideSerializer,
    BulkOutcomeSerializer,
    DecideSerializer,
    MarkSerializer,
    RespondSerializer,
    ReviewerSerializer,
    SnoozeSerializer,
)
from projects.api import ProjectActionPermissions, access_for
from runs.idempotency import IDEMPOTENCY_KEY_PARAMETER, idempotent, idempotent_action

_NOT_FOUND = OpenApiResponse(ErrorSerializer, description="No approval request with this id.")
_DECIDE_RESPONSES = {
    200: ApprovalSerializer,
    400: OpenApiResponse(ErrorSerializer, description="Malformed input."),
    403: OpenApiResponse(
        ErrorSerializer, description="Not a reviewer, or the reviewer requested the run."
    ),
    404: _NOT_FOUND,
    409: OpenApiResponse(
        ErrorSerializer,
        description="No longer pending (decided, expired, cancelled) or already decided by you.",
    ),
}
_MARK_RESPONSES = {
    200: MarkSerializer,
    400: OpenApiResponse(ErrorSerializer, description="Malformed input; nothing changed."),
    404: _NOT_FOUND,
    409: OpenApiResponse(ErrorSerializer, description="No longer pending."),
}


class ApprovalFilter(StrictFilterSet):
    """``?status=``; an unknown value is a 400 naming the allowed ones."""

    status = filters.ChoiceFilter(choices=ApprovalStatus.choices)

    class Meta:
        model = ApprovalRequest
        fields = ["status"]


@extend_schema(tags=["approvals"])
@extend_schema_view(
    list=extend_schema(summary="Approval requests, oldest first (cursor pages)."),
    retrieve=extend_schema(
        summary="One approval request.", responses={200: ApprovalSerializer, 404: _NOT_FOUND}
    ),
)
class ApprovalViewSet(viewsets.GenericViewSet):
    """Approval requests: list, read (``approvals.view_approvalrequest``); approve, reject,
    respond and decide a selection in bulk (``approvals.decide_approvalrequest``; the service
    also refuses a reviewer deciding on a run they requested); snooze and assign to oneself
    (the caller's own marks, ``approvals.view_approvalrequest``, as in the inbox)."""

    lookup_value_converter = "int"
    permission_classes = [ProjectActionPermissions]
    view_permission = "approvals.view_approvalrequest"
    not_found = "approval request not found"
    action_permissions = {
        "list": ("approvals.view_approvalrequest",),
        "retrieve": ("approvals.view_approvalrequest",),
        "approve": ("approvals.decide_approvalrequest",),
        "reject": ("approvals.decide_approvalrequest",),
        "respond": ("approvals.decide_approvalrequest",),
        "bulk": ("approvals.decide_approvalrequest",),
        "snooze": ("approvals.view_approvalrequest",),
        "assign": ("approvals.view_approvalrequest",),
        "reviewer": ("approvals.view_approvalrequest",),
    }
    filterset_class = ApprovalFilter
    pagination_class = OldestFirstPagination
    serializer_class = ApprovalSerializer

    def get_queryset(self) -> QuerySet[ApprovalRequest]:
        """The approval requests of the projects where the user may see them."""
        return access_for(self.request).scope(
            selectors.approval_list(), "approvals.view_approvalrequest", "run__project_id"
        )

    def project_id_of(self, pk: int) -> int | None:
        """The project of approval request ``pk`` (None: no such request)."""
        found = ApprovalRequest.objects.filter(pk=pk).values_list("run__project_id", flat=True)
        return found.first()

    def _approval_response(self, approval_id: int) -> Response:
        return Response(ApprovalSerializer(selectors.approval_list().get(pk=approval_id)).data)

    def list(self, request: Request) -> Response:
        """Approval requests oldest first, ``?status=pending`` for the inbox."""
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(ApprovalSerializer(page, many=True).data)

    def retrieve(self, request: Request, pk: int) -> Response:
        """One approval request with its run, step and decisions."""
        return self._approval_response(pk)

    def _decide(self, request: Request, pk: int, decision: str) -> Response:
        body = DecideSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        services.approval_decide(
            approval_id=pk,
            actor=actor_for(request),
            decision=decision,
            comment=body.validated_data["comment"],
            args=body.validated_data.get("args"),
        )
        return self._approval_response(pk)

    @idempotent_action(
        summary="Approve: the step runs once enough reviewers approved.",
        request=DecideSerializer,
        responses=_DECIDE_RESPONSES,
    )
    def approve(self, request: Request, pk: int) -> Response:
        """Record an approval (``services.approval_decide``)."""
        return self._decide(request, pk, Decision.APPROVE)

    @idempotent_action(
        summary="Reject: the step is rejected with the comment as its reason.",
        request=DecideSerializer,
        responses=_DECIDE_RESPONSES,
    )
    def reject(self, request: Request, pk: int) -> Response:
        """Record a rejection (``services.approval_decide``)."""
        return self._decide(request, pk, Decision.REJECT)

    @idempotent_action(
        summary="Respond: send an answer back to the agent instead of running the call.",
        request=RespondSerializer,
        responses=_DECIDE_RESPONSES,
    )
    def respond(self, request: Request, pk: int) -> Response:
        """Record a response (``services.approval_decide`` with ``respond``): the step ends
        with the answer as its outcome, which a client run's agent reads."""
        body = RespondSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        services.approval_decide(
            approval_id=pk,
            actor=actor_for(request),
            decision=Decision.RESPOND,
            comment=body.validated_data["comment"],
        )
        return self._approval_response(pk)

    @extend_schema(
        summary="Decide a selection: one decision on each request, each under its own rules.",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=BulkDecideSerializer,
        responses={
            200: BulkOutcomeSerializer,
            400: OpenApiResponse(
                ErrorSerializer,
                description="Malformed input (no ids, too many, a reason missing); nothing "
                "was decided.",
            ),
            403: OpenApiResponse(ErrorSerializer, description="Not a reviewer anywhere."),
        },
    )
    @action(detail=False, methods=["post"])
    @idempotent
    def bulk(self, request: Request) -> Response:
        """One decision (approve, reject or respond, with ``comment``) on each of ``ids``
        (``services.approval_decide_many``): each request is decided or refused on its own
        (not pending, already decided by the caller, their own run); ids the caller may not
        see are refused as "no such request", as unknown ones are."""
        body = BulkDecideSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        wanted = list(dict.fromkeys(body.validated_data["ids"]))
        visible = set(self.get_queryset().filter(pk__in=wanted).values_list("pk", flat=True))
        chosen = [pk for pk in wanted if pk in visible]
        outcome = services.BulkOutcome(decided=[], refused={})
        if chosen:
            outcome = services.approval_decide_many(
                approval_ids=chosen,
                actor=actor_for(request),
                decision=body.validated_data["decision"],
                comment=body.validated_data["comment"],
            )
        hidden = {pk: "no such request" for pk in wanted if pk not in visible}
        result = services.BulkOutcome(outcome.decided, {**hidden, **outcome.refused})
        return Response(BulkOutcomeSerializer(result).data)

    def _mark(
        self,
        request: Request,
        pk: int,
        serializer: type[serializers.Serializer],
        change: Callable[..., ApprovalMark],
        field: str,
    ) -> Response:
        """Change the caller's mark of request ``pk`` with ``change`` (a ``marks`` function
        taking ``approval_id``, ``actor`` and ``field``), ``field`` read from the body as
        ``serializer`` checks it; answers the mark (``MarkSerializer``)."""
        body = serializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields = {field: body.validated_data[field]}
        mark = change(approval_id=pk, actor=actor_for(request), **fields)
        return Response(MarkSerializer(mark).data)

    @extend_schema(
        summary="Snooze: hide the request from your own inbox until a time (null: show it).",
        request=SnoozeSerializer,
        responses=_MARK_RESPONSES,
    )
    @action(detail=True, methods=["post"])
    def snooze(self, request: Request, pk: int) -> Response:
        """Change the caller's snooze of request ``pk`` (``marks.approval_snooze``)."""
        return self._mark(request, pk, SnoozeSerializer, marks.approval_snooze, "until")

    @extend_schema(
        summary="Assign to me: mark the request as taken on by you (false: take it back).",
        request=AssignSerializer,
        responses=_MARK_RESPONSES,
    )
    @action(detail=True, methods=["post"])
    def assign(self, request: Request, pk: int) -> Response:
        """Change whether request ``pk`` is assigned to the caller
        (``marks.approval_assign``)."""
        return self._mark(request, pk, AssignSerializer, marks.approval_assign, "assigned")

    @extend_schema(
        summary="The caller as a reviewer: their groups (who may decide a group's requests).",
        responses={200: ReviewerSerializer},
    )
    @action(detail=False, methods=["get"])
    def reviewer(self, request: Request) -> Response:
        """The caller's group names, which the inbox's notifications compare with a new
        request's deciding groups (read only when the reviewer turned them on)."""
        groups = sorted(request.user.groups.values_list("name", flat=True))
        return Response(ReviewerSerializer({"groups": groups}).data)
