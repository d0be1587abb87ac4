"""REST API of evals (``/api/v1/evals/``): case sets, making cases (from a run's step, from
every run of a filter, from a τ-bench-shaped file) and removing them, the cases of a set as
JSON and as JSON Lines, and eval runs: a CI system replays the cases with its agent version
(``agentops_client.evals``) and posts the outcomes; the answer holds the pass rate and
``below_threshold``.

Thin views: parse, call one service or selector, render. Permissions, per project: read
``evals.view_caseset`` (every role), make cases and case sets ``evals.change_caseset``,
record an eval run ``evals.add_evalrun`` (operators, admins and their tokens). A case set or
eval run of a project the caller may not see is a 404.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer
from rest_framework.views import APIView

from agentops.api import ErrorSerializer, actor_for
from evals import from_runs, selectors, serializers, services, tau_bench
from evals.models import Case, CaseSet, EvalRun
from projects.api import access_for, project_for_create
from runs.models import Run

VIEW = "evals.view_caseset"
CHANGE = "evals.change_caseset"
RECORD = "evals.add_evalrun"
_ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Malformed input; `field` names it."),
    403: OpenApiResponse(ErrorSerializer, description="Your role may not do this."),
    404: OpenApiResponse(ErrorSerializer, description="No such case set (or run)."),
}


def case_set_for(request: Request, pk: int, perm: str) -> CaseSet:
    """Case set ``pk`` if the caller may see it; ``perm`` must be held in its project.

    Raises:
        NotFound: no such case set, or one the caller may not see.
        PermissionDenied: seen, but ``perm`` is not held there.
    """
    access = access_for(request)
    case_set = CaseSet.objects.filter(pk=pk).first()
    if case_set is None or not access.can(VIEW, case_set.project_id):
        raise exceptions.NotFound("no such case set")
    if not access.can(perm, case_set.project_id):
        raise exceptions.PermissionDenied(f"your role in this project does not allow it ({perm})")
    return case_set


def _cases_json(case_set: CaseSet) -> list[dict[str, Any]]:
    cases = selectors.cases_at(case_set_id=case_set.pk, version=case_set.version)
    return [selectors.case_payload(case) for case in cases]


def _added(
    request: Request, pk: int, form: type[Serializer[Any]], make: Callable[..., list[Case]]
) -> Response:
    """Add the cases ``make`` (a service) makes of the body (checked by ``form``) to case set
    ``pk``: 201 with ``{"version", "cases": [ids]}``, the set's version after them."""
    case_set = case_set_for(request, pk, CHANGE)
    body = form(data=request.data)
    body.is_valid(raise_exception=True)
    cases = make(case_set_id=case_set.pk, actor=actor_for(request), **body.validated_data)
    case_set.refresh_from_db(fields=["version"])
    added = {"version": case_set.version, "cases": [case.pk for case in cases]}
    return Response(added, status=status.HTTP_201_CREATED)


class CaseSetsView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses={200: serializers.CaseSetSerializer(many=True)})
    def get(self, request: Request) -> Response:
        """The case sets of the projects where the caller may see them, by name."""
        found = access_for(request).scope(CaseSet.objects.select_related("project"), VIEW)
        return Response(serializers.CaseSetSerializer(found, many=True).data)

    @extend_schema(
        request=serializers.CaseSetCreateSerializer,
        responses={201: serializers.CaseSetSerializer, **_ERRORS},
    )
    def post(self, request: Request) -> Response:
        """Create an empty case set (version 0) in ``project`` (a slug; default: the token's
        or the caller's only project)."""
        body = serializers.CaseSetCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        project = project_for_create(
            access_for(request), body.validated_data.get("project"), CHANGE
        )
        case_set = services.case_set_create(
            project_id=project.pk,
            name=body.validated_data["name"],
            description=body.validated_data.get("description", ""),
            actor=actor_for(request),
        )
        return Response(
            serializers.CaseSetSerializer(case_set).data, status=status.HTTP_201_CREATED
        )


class CaseSetCasesView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses={200: OpenApiTypes.OBJECT, 404: _ERRORS[404]})
    def get(self, request: Request, pk: int) -> Response:
        """``{"version", "cases": [...]}``: the cases of the set's current version."""
        case_set = case_set_for(request, pk, VIEW)
        return Response({"version": case_set.version, "cases": _cases_json(case_set)})

    @extend_schema(
        request=serializers.CaseFromRunSerializer,
        responses={201: OpenApiTypes.OBJECT, **_ERRORS},
    )
    def post(self, request: Request, pk: int) -> Response:
        """Make a case of ``run`` at its step ``step_index`` (``evals.from_runs``); the run
        must be of the set's project."""
        case_set = case_set_for(request, pk, CHANGE)
        body = serializers.CaseFromRunSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        if not Run.objects.filter(pk=data["run"], project_id=case_set.project_id).exists():
            raise exceptions.NotFound("no such run in the case set's project")
        case = from_runs.case_make_from_run(
            case_set_id=case_set.pk,
            run_id=data["run"],
            step_index=data["step_index"],
            expect=data["expect"],
            calls=data.get("calls"),
            final_contains=data.get("final_contains", ""),
            name=data.get("name", ""),
            actor=actor_for(request),
        )
        return Response(selectors.case_payload(case), status=status.HTTP_201_CREATED)


class CaseSetBulkView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        request=serializers.CasesFromRunsSerializer,
        responses={201: OpenApiTypes.OBJECT, **_ERRORS},
    )
    def post(self, request: Request, pk: int) -> Response:
        """Make a case of every run of the set's project in ``statuses`` created between
        ``created_after`` and ``created_before``; ``{"version", "cases": [ids]}``."""
        return _added(
            request, pk, serializers.CasesFromRunsSerializer, from_runs.cases_make_from_runs
        )


class CaseSetImportView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        request=serializers.TauBenchImportSerializer,
        responses={201: OpenApiTypes.OBJECT, **_ERRORS},
    )
    def post(self, request: Request, pk: int) -> Response:
        """Add a case per τ-bench-shaped conversation that calls one of ``write_tools``
        (``evals.tau_bench``); ``{"version", "cases": [ids]}``."""
        return _added(
            request, pk, serializers.TauBenchImportSerializer, tau_bench.cases_import_tau_bench
        )


class CaseSetExportView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses={(200, "application/jsonl"): OpenApiTypes.STR, 404: _ERRORS[404]})
    def get(self, request: Request, pk: int) -> HttpResponse:
        """The cases of the set's current version as JSON Lines (a case per line)."""
        case_set = case_set_for(request, pk, VIEW)
        lines = b"".join(orjson.dumps(case) + b"\n" for case in _cases_json(case_set))
        response = HttpResponse(lines, content_type="application/jsonl")
        response["Content-Disposition"] = f'attachment; filename="case-set-{case_set.pk}.jsonl"'
        return response


class EvalRunsView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        request=serializers.EvalRunCreateSerializer,
        responses={201: OpenApiTypes.OBJECT, **_ERRORS},
    )
    def post(self, request: Request) -> Response:
        """Record and score one replay of a case set (``outcomes``: one per case of the
        version, as ``agentops_client.evals.replay_case`` makes them)."""
        body = serializers.EvalRunCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        case_set = case_set_for(request, data["case_set"], RECORD)
        eval_run = services.eval_run_record(
            case_set_id=case_set.pk,
            version=data.get("version"),
            agent_version=data["agent_version"],
            outcomes=data["outcomes"],
            threshold=data.get("threshold"),
            actor=actor_for(request),
        )
        return Response(serializers.eval_run_json(eval_run), status=status.HTTP_201_CREATED)


class EvalRunView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses={200: OpenApiTypes.OBJECT, 404: _ERRORS[404]})
    def get(self, request: Request, pk: int) -> Response:
        """An eval run with its per-case results."""
        eval_run = EvalRun.objects.filter(pk=pk).first()
        if eval_run is None:
            raise exceptions.NotFound("no such eval run")
        case_set_for(request, eval_run.case_set_id, VIEW)
        return Response(serializers.eval_run_json(eval_run))


class CaseView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses={200: serializers.CaseSetSerializer, **_ERRORS})
    def delete(self, request: Request, pk: int) -> Response:
        """Take a case out of its set from the set's next version on (the versions before,
        and their eval runs, keep it); answers the case set at its new version."""
        case = Case.objects.filter(pk=pk, removed_in__isnull=True).first()
        if case is None:
            raise exceptions.NotFound("no such case in a current version")
        case_set_for(request, case.case_set_id, CHANGE)
        case_set = services.case_remove(case_id=case.pk, actor=actor_for(request))
        return Response(serializers.CaseSetSerializer(case_set).data)
