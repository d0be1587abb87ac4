"""REST API of approval requests: the reviewers' queue and their decisions (``/api/v1/``).

Thin views: parse, call one service or selector, render; domain errors become status codes in
``agentops.api.exception_handler``.
"""

from __future__ import annotations

from django.db.models import QuerySet
from django_filters import rest_framework as filters
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from agentops.api import ErrorSerializer, OldestFirstPagination, StrictFilterSet, actor_for
from approvals import selectors, services
from approvals.models import ApprovalRequest, ApprovalStatus, Decision
from approvals.serializers import ApprovalSerializer, DecideSerializer
from projects.api import ProjectActionPermissions, access_for
from runs.idempotency import IDEMPOTENCY_KEY_PARAMETER, idempotent

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
    """Approval requests: list, read (``approvals.view_approvalrequest``), approve and reject
    (``approvals.decide_approvalrequest``; the service also refuses a reviewer deciding on a
    run they requested)."""

    lookup_value_converter = "int"
    permission_classes = [ProjectActionPermissions]
    view_permission = "approvals.view_approvalrequest"
    not_found = "approval request not found"
    action_permissions = {
        "list": ("approvals.view_approvalrequest",),
        "retrieve": ("approvals.view_approvalrequest",),
        "approve": ("approvals.decide_approvalrequest",),
        "reject": ("approvals.decide_approvalrequest",),
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

    @extend_schema(
        summary="Approve: the step runs once enough reviewers approved.",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=DecideSerializer,
        responses=_DECIDE_RESPONSES,
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def approve(self, request: Request, pk: int) -> Response:
        """Record an approval (``services.approval_decide``)."""
        return self._decide(request, pk, Decision.APPROVE)

    @extend_schema(
        summary="Reject: the step is rejected with the comment as its reason.",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=DecideSerializer,
        responses=_DECIDE_RESPONSES,
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def reject(self, request: Request, pk: int) -> Response:
        """Record a rejection (``services.approval_decide``)."""
        return self._decide(request, pk, Decision.REJECT)
