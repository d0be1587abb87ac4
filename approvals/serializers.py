"""JSON shape of approval requests for the REST API, and the decision input."""

from __future__ import annotations

from rest_framework import serializers

from agentops.api import StrictSerializer
from agentops.serializers import FieldsBuiltOnce
from approvals.models import ApprovalDecision, ApprovalRequest
from approvals.services import MAX_COMMENT
from runs.models import Run, Step


class DecisionSerializer(FieldsBuiltOnce, serializers.ModelSerializer[ApprovalDecision]):
    """One reviewer's decision; ``reviewer`` is their username as it was when deciding."""

    reviewer = serializers.CharField(source="reviewer_name", read_only=True)

    class Meta:
        model = ApprovalDecision
        fields = ["reviewer", "decision", "comment", "created_at"]
        read_only_fields = fields


class ApprovalRunSerializer(FieldsBuiltOnce, serializers.ModelSerializer[Run]):
    """The run an approval belongs to: its id, goal and requester's username."""

    requested_by = serializers.CharField(
        source="requested_by.username", read_only=True, allow_null=True
    )

    class Meta:
        model = Run
        fields = ["id", "goal", "requested_by"]
        read_only_fields = fields


class ApprovalStepSerializer(FieldsBuiltOnce, serializers.ModelSerializer[Step]):
    """What the agent wants to do: the tool, its arguments and the agent's rationale."""

    class Meta:
        model = Step
        fields = ["id", "index", "tool", "args", "rationale"]
        read_only_fields = fields


class ApprovalSerializer(FieldsBuiltOnce, serializers.ModelSerializer[ApprovalRequest]):
    """An approval request with its run, step and decisions so far.

    Expects the request loaded by ``approvals.selectors.approval_list`` (no extra queries).
    ``required_approvals`` approvals from different reviewers approve it; one rejection
    rejects it.
    """

    run = ApprovalRunSerializer(read_only=True)
    step = ApprovalStepSerializer(read_only=True)
    decisions = DecisionSerializer(many=True, read_only=True)

    class Meta:
        model = ApprovalRequest
        fields = [
            "id",
            "status",
            "risk",
            "required_approvals",
            "expires_at",
            "created_at",
            "decided_at",
            "run",
            "step",
            "decisions",
        ]
        read_only_fields = fields


class DecideSerializer(StrictSerializer):
    """``POST /api/v1/approvals/{id}/approve|reject/``: the reviewer's comment (optional;
    a rejection's comment becomes the step's error reason) and, to approve with edits, the
    edited ``args``."""

    comment = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=MAX_COMMENT
    )
    args = serializers.DictField(
        required=False,
        help_text="Approve only: the step's arguments as the reviewer edited them (a JSON object "
        "that passes the tool's schema); the step runs with them under a new idempotency key.",
    )
