"""JSON shape of approval requests for the REST API, the decision input (one, a response, a
bulk decision) and the caller's own marks (snooze, assign to me)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agentops.api import StrictSerializer
from agentops.serializers import FieldsBuiltOnce
from approvals.models import ApprovalDecision, ApprovalMark, ApprovalRequest, Decision
from approvals.services import MAX_BULK, MAX_COMMENT, BulkOutcome
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


class RespondSerializer(StrictSerializer):
    """``POST /api/v1/approvals/{id}/respond/``: the answer sent back to the agent instead of
    running the call (LangGraph Agent Inbox's "respond"); the step ends ``rejected`` with
    ``{"type": "responded", "message": comment}`` as its outcome."""

    comment = serializers.CharField(
        max_length=MAX_COMMENT, help_text="The answer for the agent (required, not blank)."
    )


class BulkDecideSerializer(StrictSerializer):
    """``POST /api/v1/approvals/bulk/``: one reviewer's decision on each of ``ids``, each
    under the same rules as a single decision (four eyes, M approvals, deciding groups)."""

    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        min_length=1,
        max_length=MAX_BULK,
        help_text=f"Approval request ids (1 to {MAX_BULK}; a repeated id counts once).",
    )
    decision = serializers.ChoiceField(choices=Decision.choices)
    comment = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=MAX_COMMENT,
        help_text="Required to reject (the reason) or respond (the answer for the agent).",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A rejection or a response without its text is refused whole."""
        if attrs["decision"] != Decision.APPROVE and not attrs["comment"].strip():
            raise serializers.ValidationError(
                {"comment": ["a rejection needs its reason, a response its answer"]}
            )
        return attrs


class BulkOutcomeSerializer(serializers.Serializer[BulkOutcome]):
    """What a bulk decision did: ``decided``, the ids decided (in the order given), and
    ``refused``, why each other id was not (id → the refusal; an id that does not exist or is
    in a project the caller may not see reads "no such request")."""

    decided = serializers.ListField(child=serializers.IntegerField(), read_only=True)
    refused = serializers.DictField(child=serializers.CharField(), read_only=True)


class SnoozeSerializer(StrictSerializer):
    """``POST /api/v1/approvals/{id}/snooze/``: hide the request from the caller's own inbox
    until ``until`` (ISO 8601 with a zone, in the next 7 days), or show it again (null)."""

    until = serializers.DateTimeField(allow_null=True)


class AssignSerializer(StrictSerializer):
    """``POST /api/v1/approvals/{id}/assign/``: assign the request to the caller ("assign to
    me", ``true``) or take the assignment back (``false``)."""

    assigned = serializers.BooleanField()


class ReviewerSerializer(serializers.Serializer[dict[str, Any]]):
    """The caller as a reviewer: the names of their ``groups`` (a request whose policy names
    deciding groups may be decided only by their members)."""

    groups = serializers.ListField(child=serializers.CharField(), read_only=True)


class MarkSerializer(FieldsBuiltOnce, serializers.ModelSerializer[ApprovalMark]):
    """The caller's own marks on an approval request: ``snoozed_until`` (null: not snoozed)
    and ``assigned_at`` (null: not assigned to them)."""

    approval = serializers.IntegerField(source="approval_id", read_only=True)

    class Meta:
        model = ApprovalMark
        fields = ["approval", "snoozed_until", "assigned_at"]
        read_only_fields = fields
