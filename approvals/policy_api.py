"""REST API of a project's policy (``/api/v1/projects/<slug>/policy/``): read it, set its tool
grant, add, change and delete its own risk rules. Only the project's admins
(``approvals.rules.POLICY_PERMISSION``) may do any of it: to anyone else the project's policy
does not exist (404), so nobody learns another project's rules.

Thin views: parse, call one service, render; domain errors become status codes in
``agentops.api.exception_handler``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentops.api import ErrorSerializer, actor_for
from approvals.models import RiskRule
from approvals.policy_serializers import (
    GrantInputSerializer,
    PolicySerializer,
    RiskRuleInputSerializer,
    RiskRuleSerializer,
)
from approvals.rules import (
    POLICY_PERMISSION,
    risk_rule_delete,
    risk_rule_save,
    risk_rule_update,
    rule_as_json,
)
from projects.api import access_for
from projects.models import Project
from runs.policy import project_grant_set

_NOT_FOUND = OpenApiResponse(ErrorSerializer, description="No project (or rule) you administer.")
_BAD = OpenApiResponse(ErrorSerializer, description="Malformed input; nothing changed.")


def _administered(request: Request, slug: str) -> Project:
    """The project ``slug`` if the request's user administers it.

    Raises:
        NotFound: no such project, or one they do not administer.
    """
    project = Project.objects.filter(slug=slug).first()
    if project is None or not access_for(request).can(POLICY_PERMISSION, project.pk):
        raise exceptions.NotFound("project not found")
    return project


def _policy(project: Project) -> dict[str, Any]:
    rules = RiskRule.objects.filter(project=project)
    defaults = RiskRule.objects.filter(project__isnull=True)
    related = ("approvers", "escalation_group")
    return {
        "project": project.slug,
        "version": project.policy_version,
        "grant": project.grant,
        "risk_rules": [rule_as_json(r) for r in rules.select_related(*related)],
        "default_risk_rules": [rule_as_json(r) for r in defaults.select_related(*related)],
    }


class PolicyView(APIView):
    """``GET /api/v1/projects/<slug>/policy/``: the project's policy."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        summary="A project's policy: its grant, its own risk rules and the defaults.",
        responses={200: PolicySerializer, 404: _NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        return Response(_policy(_administered(request, slug)))


class GrantView(APIView):
    """``PUT /api/v1/projects/<slug>/policy/grant/``: replace the project's tool grant."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        summary="Replace the project's tool grant (audited, a new policy version).",
        request=GrantInputSerializer,
        responses={200: PolicySerializer, 400: _BAD, 404: _NOT_FOUND},
    )
    def put(self, request: Request, slug: str) -> Response:
        project = _administered(request, slug)
        body = GrantInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        project_grant_set(
            project_id=project.pk, actor=actor_for(request), grant=body.validated_data["grant"]
        )
        project.refresh_from_db()
        return Response(_policy(project))


class RiskRulesView(APIView):
    """``POST /api/v1/projects/<slug>/policy/risk-rules/``: add a rule to the project."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        summary="Add a risk rule to the project's policy (audited, a new policy version).",
        request=RiskRuleInputSerializer,
        responses={201: RiskRuleSerializer, 400: _BAD, 404: _NOT_FOUND},
    )
    def post(self, request: Request, slug: str) -> Response:
        project = _administered(request, slug)
        body = RiskRuleInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        rule = risk_rule_save(
            actor=actor_for(request), rule=RiskRule(project=project, **body.validated_data)
        )
        return Response(rule_as_json(rule), status=status.HTTP_201_CREATED)


class RiskRuleView(APIView):
    """``PATCH`` / ``DELETE /api/v1/projects/<slug>/policy/risk-rules/<id>/``: change or
    delete one of the project's own rules (the global defaults are not the project's)."""

    permission_classes = [IsAuthenticated]

    def _rule(self, request: Request, slug: str, rule_id: int) -> RiskRule:
        project = _administered(request, slug)
        rule = RiskRule.objects.filter(pk=rule_id, project=project).first()
        if rule is None:
            raise exceptions.NotFound("rule not found")
        return rule

    @extend_schema(
        summary="Change one of the project's risk rules (audited, a new policy version).",
        request=RiskRuleInputSerializer,
        responses={200: RiskRuleSerializer, 400: _BAD, 404: _NOT_FOUND},
    )
    def patch(self, request: Request, slug: str, rule_id: int) -> Response:
        rule = self._rule(request, slug, rule_id)
        body = RiskRuleInputSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        rule = risk_rule_update(actor=actor_for(request), rule=rule, fields=body.validated_data)
        return Response(rule_as_json(rule))

    @extend_schema(
        summary="Delete one of the project's risk rules (audited, a new policy version).",
        responses={204: None, 404: _NOT_FOUND},
    )
    def delete(self, request: Request, slug: str, rule_id: int) -> Response:
        risk_rule_delete(actor=actor_for(request), rule=self._rule(request, slug, rule_id))
        return Response(status=status.HTTP_204_NO_CONTENT)
