"""JSON shapes of agent states and their schemas for the REST API (``runs.state_api``),
and their input and query serializers."""

from __future__ import annotations

from rest_framework import serializers

from agentops.api import StrictSerializer
from runs.control.state import MAX_RATIONALE
from runs.models import (
    StateSchema,
)


class AgentStateSerializer(serializers.Serializer):
    """One version of a run's agent state (``runs.selectors.AgentState``): ``version`` (0: the
    initial state), the ``state`` object and its ``schema_version``; ``upgraded_from`` is the
    schema version it is stored under when it is shown upgraded to a newer one (null: shown
    as stored)."""

    version = serializers.IntegerField()
    state = serializers.DictField()
    schema_version = serializers.IntegerField()
    upgraded_from = serializers.IntegerField(allow_null=True)


class StateQuerySerializer(serializers.Serializer):
    """``?version=``: the state version to read (default: the current one)."""

    version = serializers.IntegerField(required=False, min_value=0, max_value=2**31 - 1)


class StateRationaleQuerySerializer(StrictSerializer):
    """A state write's ``?rationale=``: why it is written (a session's state write takes
    nothing else)."""

    rationale = serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        max_length=MAX_RATIONALE,
        trim_whitespace=False,
    )


class StateWriteQuerySerializer(StateRationaleQuerySerializer):
    """A run's state write's ``?rationale=`` (why the agent writes it) and ``?step_index=``
    (the index of the run's step it belongs to)."""

    step_index = serializers.IntegerField(required=False, min_value=0, max_value=2**31 - 1)


# What a state schema version shows, in the API and the admin.
STATE_SCHEMA_FIELDS = [
    "project",
    "name",
    "version",
    "schema",
    "migration_function",
    "migration_steps",
    "description",
    "created_by_name",
    "created_at",
]


class StateSchemaSerializer(serializers.ModelSerializer[StateSchema]):
    """A version of a project's state schema (``runs.models.StateSchema``): its JSON Schema
    (draft 2020-12) and the migration from the version before (a registered function's
    dotted path, or declarative steps)."""

    project = serializers.CharField(source="project.slug", read_only=True)
    schema = serializers.JSONField()
    migration_steps = serializers.JSONField()

    class Meta:
        model = StateSchema
        fields = ["id", *STATE_SCHEMA_FIELDS]
        read_only_fields = fields


class CreateStateSchemaSerializer(StrictSerializer):
    """``POST /api/v1/state-schemas/``: ``version`` defaults to the next; a version above 1
    needs ``migration_function`` (a registered one) or ``migration_steps`` (rename, move,
    default, remove on JSON Pointers; ``[]``: states carry over unchanged)."""

    project = serializers.SlugField(
        required=False,
        max_length=50,
        help_text="The project's slug. Default: the token's project, or the only one where "
        "you may register schemas.",
    )
    name = serializers.SlugField(max_length=100)
    version = serializers.IntegerField(required=False, min_value=1, max_value=2**31 - 1)
    schema = serializers.JSONField(help_text="A JSON Schema (draft 2020-12) object.")
    migration_function = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=255
    )
    migration_steps = serializers.JSONField(required=False, default=None, allow_null=True)
    description = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=2000
    )


class StateSchemaQuerySerializer(serializers.Serializer):
    """``?name=``: only the versions of this schema (empty: none)."""

    name = serializers.SlugField(required=False, allow_blank=True, max_length=100)
