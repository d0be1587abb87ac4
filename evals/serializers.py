"""Request and response shapes of the evals API (``evals.api``): checked here for their
types; what a service checks beyond them (a condition's grammar, a step that exists) is its
400."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from rest_framework import serializers

from agentops.api import StrictSerializer
from evals.models import CaseSet, EvalRun
from evals.selectors import expected_calls
from runs.statuses import RunStatus


class CaseSetSerializer(serializers.ModelSerializer[CaseSet]):
    project: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )

    class Meta:
        model = CaseSet
        fields = ["id", "project", "name", "description", "version", "created_at"]


class CaseSetCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    project = serializers.CharField(required=False, max_length=100, help_text="project slug")


class CaseFromRunSerializer(StrictSerializer):
    run = serializers.UUIDField()
    step_index = serializers.IntegerField(min_value=0)
    expect = serializers.ChoiceField(choices=["recorded", "rejected", "operator"])
    calls = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        max_length=100,
        help_text='operator: [{"tool", "args"} or {"tool", "condition"}, ...]',
    )
    final_contains = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=2000,
        help_text="text the agent's final answer must contain (case-insensitive)",
    )
    name = serializers.CharField(required=False, max_length=300)


class CasesFromRunsSerializer(StrictSerializer):
    statuses = serializers.ListField(
        child=serializers.ChoiceField(choices=RunStatus.choices), min_length=1
    )
    created_after = serializers.DateTimeField(required=False)
    created_before = serializers.DateTimeField(required=False)


class TauBenchImportSerializer(StrictSerializer):
    conversations = serializers.ListField(child=serializers.DictField(), max_length=1000)
    write_tools = serializers.ListField(child=serializers.CharField(max_length=128), min_length=1)
    limit = serializers.IntegerField(required=False, min_value=1)


class EvalRunCreateSerializer(StrictSerializer):
    case_set = serializers.IntegerField(min_value=1)
    version = serializers.IntegerField(required=False, allow_null=True, min_value=0)
    agent_version = serializers.CharField(max_length=200)
    threshold = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=1)
    outcomes = serializers.ListField(
        child=serializers.DictField(),
        help_text='one per case: {"case", "calls": [{"tool", "args", "sandboxed"}], "final", '
        '"error"}',
    )


def eval_run_json(eval_run: EvalRun) -> dict[str, Any]:
    """An eval run as JSON: its figures, page address and per-case results (expected vs
    made)."""
    results = eval_run.results.select_related("case")
    return {
        "id": eval_run.pk,
        "case_set": eval_run.case_set_id,
        "case_set_version": eval_run.case_set_version,
        "agent_version": eval_run.agent_version,
        "total": eval_run.total,
        "passed": eval_run.passed,
        "pass_rate": eval_run.pass_rate,
        "threshold": eval_run.threshold,
        "below_threshold": eval_run.below_threshold,
        "created_at": eval_run.created_at.isoformat(),
        "url": reverse("eval-run", args=[eval_run.pk]),
        "results": [
            {
                "case": result.case_id,
                "name": result.case.name,
                "passed": result.passed,
                "reason": result.reason,
                "expected": expected_calls(result.case),
                "made": result.made,
            }
            for result in results
        ],
    }
