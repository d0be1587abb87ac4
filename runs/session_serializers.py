"""JSON shapes of sessions (``runs.models.AgentSession``) and their API's input serializers.

Like ``runs.serializers``, input serializers check shapes only; the services
(``runs.control.sessions``) check what values mean.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agentops.api import StrictSerializer
from agentops.serializers import FieldsBuiltOnce
from runs.control.sessions import MAX_ID_CHARS, MAX_ITEMS
from runs.models import AgentSession, Message
from runs.state_serializers import StateRationaleQuerySerializer


class SessionSerializer(FieldsBuiltOnce, serializers.ModelSerializer[AgentSession]):
    """A session: ``id``, the client's ``external_id``, the end user's ``subject``,
    ``metadata``, ``project`` (slug), ``status`` (open, closed), ``message_count`` (its
    conversation's messages, removed ones included), ``context_tokens`` (its active
    context's size, estimated tokens), who created it (``creator``, a name), ``runs`` (the
    ids of its runs, oldest first) and when it was created, updated and closed."""

    project = serializers.CharField(source="project.slug", read_only=True)
    creator = serializers.CharField(source="creator_name", read_only=True)
    runs = serializers.SerializerMethodField()

    class Meta:
        model = AgentSession
        fields = [
            "id",
            "external_id",
            "subject",
            "metadata",
            "grant",
            "project",
            "status",
            "message_count",
            "context_tokens",
            "creator",
            "runs",
            "created_at",
            "updated_at",
            "closed_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.ListField(child=serializers.UUIDField()))
    def get_runs(self, session: AgentSession) -> list[str]:
        return [str(run.pk) for run in session.runs.all()]


class CreateSessionSerializer(StrictSerializer):
    """``POST /api/v1/sessions/``: the client's ``external_id`` (unique in the project), the
    end user's ``subject`` id, ``metadata`` (a JSON object), the ``project`` slug and the
    ``grant`` of the tools its runs may call (``agentops.grants``)."""

    external_id = serializers.CharField(max_length=MAX_ID_CHARS, trim_whitespace=False)
    subject = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=MAX_ID_CHARS
    )
    metadata = serializers.DictField(required=False)
    grant = serializers.JSONField(
        required=False,
        help_text='The tools its runs may call: {"tools": [patterns], "constraints": '
        "{pattern: condition}}; default: any tool.",
    )
    project = serializers.SlugField(
        required=False,
        max_length=50,
        help_text="The project's slug. Default: the token's project, or the only one where "
        "you may create runs.",
    )


class SessionMessageSerializer(FieldsBuiltOnce, serializers.ModelSerializer[Message]):
    """One message of a session: its ``session_position`` (0-based, in the order added),
    ``message`` as added (OpenAI chat format or Responses-API item), ``tokens`` (estimated),
    ``run`` (the run that appended it; null: added to the session directly) and
    ``removed_at`` (when ``pop`` or ``clear`` took it out of the active conversation)."""

    message = serializers.SerializerMethodField()

    class Meta:
        model = Message
        fields = ["session_position", "message", "tokens", "run", "removed_at", "created_at"]
        read_only_fields = fields

    @extend_schema_field(serializers.DictField())
    def get_message(self, message: Message) -> dict[str, Any]:
        return message.as_openai()


class SessionMessagePageSerializer(FieldsBuiltOnce, serializers.Serializer):
    """The latest messages of a session, oldest first, and ``message_count``: how many it has
    in all."""

    messages = SessionMessageSerializer(many=True)
    message_count = serializers.IntegerField()


class SessionMessagesQuerySerializer(serializers.Serializer):
    """``?last=`` (1-1000, default 50): how many messages, the newest."""

    last = serializers.IntegerField(required=False, default=50, min_value=1, max_value=1000)


class SessionItemsSerializer(StrictSerializer):
    """``POST /api/v1/sessions/{id}/messages/``: ``items``, 1 to ``MAX_ITEMS`` conversation
    items (OpenAI chat messages or Responses-API input items), kept verbatim."""

    items = serializers.ListField(child=serializers.DictField(), min_length=1, max_length=MAX_ITEMS)


class SessionItemsAddedSerializer(serializers.Serializer):
    """What an add did: ``added`` items, the ``first_position`` they took, and the session's
    ``message_count`` and ``context_tokens`` after it."""

    added = serializers.IntegerField()
    first_position = serializers.IntegerField()
    message_count = serializers.IntegerField()
    context_tokens = serializers.IntegerField()


class PoppedItemSerializer(serializers.Serializer):
    """``item``: the entry taken out of the active context (null: it was empty)."""

    item = serializers.DictField(allow_null=True)


class ClearedSerializer(serializers.Serializer):
    """``removed``: how many messages left the active conversation."""

    removed = serializers.IntegerField()


class SessionStateWriteQuerySerializer(StateRationaleQuerySerializer):
    """A session state write's ``?rationale=`` (why it is written)."""


class ErasureSerializer(serializers.Serializer):
    """What erasing a subject's data did: ``sessions`` deleted, ``runs`` whose conversation
    and state were deleted (kept as redacted runs), ``messages`` and ``state_versions``
    deleted, ``artifacts`` deleted with their files, ``memory_items`` deleted with their
    history, ``audit_chains`` purged (their purge recorded in the system chain)."""

    subject = serializers.CharField()
    sessions = serializers.IntegerField()
    runs = serializers.IntegerField()
    messages = serializers.IntegerField()
    state_versions = serializers.IntegerField()
    artifacts = serializers.IntegerField()
    memory_items = serializers.IntegerField()
    audit_chains = serializers.IntegerField()
