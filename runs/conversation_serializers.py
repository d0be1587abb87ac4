"""JSON shapes of a conversation (messages, compactions, the active context) for the REST
API (``runs.conversation_api``), and their input and query serializers."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agentops.api import StrictSerializer
from agentops.serializers import FieldsBuiltOnce
from runs.context_selectors import ActiveContext
from runs.control.compaction import MAX_SUMMARY_CHARS
from runs.control.conversation import MAX_MESSAGES
from runs.identity_serializers import IdentityInputSerializer
from runs.models import (
    Compaction,
    Message,
)


class MessageSerializer(FieldsBuiltOnce, serializers.ModelSerializer[Message]):
    """One message of a run's conversation: its ``position`` (0-based, in the order
    appended), ``message`` as appended (OpenAI chat format), ``tokens`` (estimated, tokens),
    ``step_index`` (the run's last step when it was appended; null: none yet)."""

    message = serializers.SerializerMethodField()

    class Meta:
        model = Message
        fields = ["position", "message", "tokens", "step_index", "created_at"]
        read_only_fields = fields

    @extend_schema_field(serializers.DictField())
    def get_message(self, message: Message) -> dict[str, Any]:
        return message.as_openai()


class MessagesQuerySerializer(serializers.Serializer):
    """``?last=`` (1-1000, default 50): how many messages, the newest; ``?before=`` (a
    position): only messages before it, to page back (pass the first position received)."""

    last = serializers.IntegerField(required=False, default=50, min_value=1, max_value=1000)
    before = serializers.IntegerField(
        required=False, default=None, min_value=0, max_value=2**31 - 1
    )


class MessagePageSerializer(FieldsBuiltOnce, serializers.Serializer):
    """Up to ``last`` messages of a run, oldest first, and ``message_count``: how many the
    run has in all."""

    messages = MessageSerializer(many=True)
    message_count = serializers.IntegerField()


class CompactionSerializer(serializers.ModelSerializer[Compaction]):
    """A compaction: messages ``first`` to ``last`` (positions, inclusive) replaced in the
    active context by ``summary``; ``tokens_before`` and ``tokens_after`` (tokens) the
    context's size around it; ``summarizer`` ``client`` or the server summarizer's dotted
    path, and its ``summarizer_version``; ``actor`` who asked (a name)."""

    class Meta:
        model = Compaction
        fields = [
            "id",
            "first",
            "last",
            "summary",
            "summary_tokens",
            "tokens_before",
            "tokens_after",
            "summarizer",
            "summarizer_version",
            "step_index",
            "actor",
            "created_at",
        ]
        read_only_fields = fields


class CompactSerializer(StrictSerializer):
    """``POST /api/v1/runs/{id}/compact/``: ``summary`` with the positions ``first`` and
    ``last`` it stands for (the client summarized), or nothing: the server's summarizer
    chooses the range and writes the summary."""

    summary = serializers.CharField(
        required=False, max_length=MAX_SUMMARY_CHARS, trim_whitespace=False
    )
    first = serializers.IntegerField(required=False, min_value=0, max_value=2**31 - 1)
    last = serializers.IntegerField(required=False, min_value=0, max_value=2**31 - 1)


class ContextSerializer(serializers.Serializer):
    """A run's active context: ``messages`` as its model is to be sent them (OpenAI chat
    format; each compaction's summary in place of the messages it replaced, as a ``system``
    message), their ``tokens`` in all (estimated, tokens) and the active ``compactions``."""

    messages = serializers.SerializerMethodField()
    tokens = serializers.IntegerField()
    compactions = CompactionSerializer(many=True)

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_messages(self, context: ActiveContext) -> list[dict[str, Any]]:
        return [entry.message for entry in context.entries]


class MessagesInputSerializer(IdentityInputSerializer):
    """``POST /api/v1/runs/{id}/messages/``: a client's model turn: ``messages`` in OpenAI chat
    format, appended to the conversation, and the model call's ``usage`` (``model``,
    ``input_tokens`` and ``output_tokens`` in tokens, ``cost_usd`` in USD, ``latency_ms`` in
    ms), added to the run's totals; what drove the turn (``IdentityInputSerializer``: agent
    name and version, system prompt, model parameters)."""

    messages = serializers.ListField(
        child=serializers.DictField(), min_length=1, max_length=MAX_MESSAGES
    )
    usage = serializers.DictField(required=False)
