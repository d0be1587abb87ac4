"""JSON shapes of LangGraph threads' checkpoints (``runs.models.threads``) and their API's
input serializers. Bytes (what LangGraph's serializer made) travel as base64 (RFC 4648 §4).

As ``runs.serializers``, input serializers check shapes only; the services
(``runs.control.threads``) check what values mean.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agentops.api import StrictSerializer
from agentops.serializers import FieldsBuiltOnce
from runs.control.thread_retention import PRUNE_STRATEGIES
from runs.control.threads import Blob, PendingWrite, Serialized
from runs.models.threads import MAX_NAME_CHARS
from runs.thread_selectors import MAX_PAGE


@extend_schema_field(OpenApiTypes.BYTE)
class Base64Field(serializers.Field):
    """Bytes as standard base64 text (RFC 4648 §4, padded)."""

    default_error_messages = {"invalid": "must be base64 (RFC 4648, padded)"}

    def to_representation(self, value: Any) -> str:
        return base64.b64encode(bytes(value)).decode()

    def to_internal_value(self, data: Any) -> bytes:
        if not isinstance(data, str):
            self.fail("invalid")
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            self.fail("invalid")


def _name(**options: Any) -> serializers.CharField:
    return serializers.CharField(max_length=MAX_NAME_CHARS, trim_whitespace=False, **options)


class SerializedSerializer(StrictSerializer):
    """A value as LangGraph's serializer made it: ``type`` (``msgpack``, ``json``,
    ``bytes``, ``null``, ``empty``...) and ``data`` (base64)."""

    type = serializers.CharField(max_length=32)
    data = Base64Field()  # type: ignore[assignment]  # the JSON key, not Serializer.data

    def to_internal_value(self, data: Any) -> Serialized:
        valid = super().to_internal_value(data)
        return Serialized(type=valid["type"], data=valid["data"])


class BlobSerializer(StrictSerializer):
    """The value of ``channel`` at ``version``: ``type`` and ``data`` (base64)."""

    channel = _name()
    version = _name()
    type = serializers.CharField(max_length=32)
    data = Base64Field()  # type: ignore[assignment]  # the JSON key, not Serializer.data

    def to_internal_value(self, data: Any) -> Blob:
        valid = super().to_internal_value(data)
        value = Serialized(type=valid["type"], data=valid["data"])
        return Blob(channel=valid["channel"], version=valid["version"], value=value)


class PutCheckpointSerializer(StrictSerializer):
    """``POST /api/v1/threads/checkpoints/``: a checkpoint of ``thread_id`` in
    ``checkpoint_ns``, named ``checkpoint_id``, saved after ``parent_checkpoint_id`` (blank:
    none); the ``checkpoint`` without its channel values, its ``channel_versions`` (channel →
    version), its ``metadata`` (JSON object), the channel values it changed (``blobs``), and
    the ``project`` slug (default: the token's)."""

    thread_id = _name()
    checkpoint_ns = _name(allow_blank=True, default="")
    checkpoint_id = _name()
    parent_checkpoint_id = _name(allow_blank=True, default="")
    checkpoint = SerializedSerializer()
    channel_versions = serializers.DictField(child=_name())
    metadata = serializers.DictField()
    blobs = BlobSerializer(many=True)
    project = serializers.CharField(required=False, max_length=50)


class WriteSerializer(StrictSerializer):
    """One pending write: its ``idx`` among the task's writes (negative for LangGraph's
    special channels), ``channel``, ``type`` and ``data`` (base64)."""

    idx = serializers.IntegerField(min_value=-(2**31), max_value=2**31 - 1)
    channel = _name()
    type = serializers.CharField(max_length=32)
    data = Base64Field()  # type: ignore[assignment]  # the JSON key, not Serializer.data

    def to_internal_value(self, data: Any) -> PendingWrite:
        valid = super().to_internal_value(data)
        value = Serialized(type=valid["type"], data=valid["data"])
        return PendingWrite(idx=valid["idx"], channel=valid["channel"], value=value)


class PutWritesSerializer(StrictSerializer):
    """``POST /api/v1/threads/writes/``: the pending ``writes`` of task ``task_id`` (at
    ``task_path``) after checkpoint ``checkpoint_id`` of ``thread_id`` in
    ``checkpoint_ns``."""

    thread_id = _name()
    checkpoint_ns = _name(allow_blank=True, default="")
    checkpoint_id = _name()
    task_id = _name()
    task_path = serializers.CharField(
        allow_blank=True, default="", max_length=4096, trim_whitespace=False
    )
    writes = serializers.ListField(child=WriteSerializer(), max_length=1000)
    project = serializers.CharField(required=False, max_length=50)


class CheckpointQuerySerializer(serializers.Serializer):
    """``GET /api/v1/threads/checkpoints/``: ``thread_id``; ``checkpoint_ns`` (absent: every
    namespace), ``checkpoint_id`` (only that one), ``before`` (only older checkpoint ids),
    ``metadata`` (a JSON object the metadata must contain), ``limit`` (1 to 100) and the
    ``project`` slug."""

    thread_id = _name()
    checkpoint_ns = _name(required=False, allow_blank=True)
    checkpoint_id = _name(required=False)
    before = _name(required=False)
    metadata = serializers.JSONField(required=False)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_PAGE)
    project = serializers.CharField(required=False, max_length=50)

    def validate_metadata(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object")
        return value


class ThreadSerializer(StrictSerializer):
    """``POST /api/v1/threads/delete/``: the ``thread_id`` whose checkpoints go."""

    thread_id = _name()
    project = serializers.CharField(required=False, max_length=50)


class CopyThreadSerializer(StrictSerializer):
    """``POST /api/v1/threads/copy/``: copy ``source_thread_id``'s checkpoints to
    ``target_thread_id``."""

    source_thread_id = _name()
    target_thread_id = _name()
    project = serializers.CharField(required=False, max_length=50)


class PruneSerializer(StrictSerializer):
    """``POST /api/v1/threads/prune/``: prune ``thread_ids`` (0 to 1,000) by ``strategy``."""

    thread_ids = serializers.ListField(child=_name(), max_length=1000)
    strategy = serializers.ChoiceField(choices=list(PRUNE_STRATEGIES), default="keep_latest")
    project = serializers.CharField(required=False, max_length=50)


class CountSerializer(serializers.Serializer):
    """How many checkpoints (or pending writes) a request saved, copied or deleted."""

    count = serializers.IntegerField()


class BlobOutSerializer(FieldsBuiltOnce, serializers.Serializer):
    """A channel's value: ``channel``, ``version``, ``type``, ``data`` (base64)."""

    channel = serializers.CharField()
    version = serializers.CharField()
    type = serializers.CharField()
    data = Base64Field()  # type: ignore[assignment]  # the JSON key, not Serializer.data


class WriteOutSerializer(FieldsBuiltOnce, serializers.Serializer):
    """A pending write: ``task_id``, ``task_path``, ``idx``, ``channel``, ``type``,
    ``data`` (base64)."""

    task_id = serializers.CharField()
    task_path = serializers.CharField()
    idx = serializers.IntegerField()
    channel = serializers.CharField()
    type = serializers.CharField()
    data = Base64Field()  # type: ignore[assignment]  # the JSON key, not Serializer.data


class CheckpointOutSerializer(FieldsBuiltOnce, serializers.Serializer):
    """A checkpoint (``runs.thread_selectors.CheckpointRecord``): ``checkpoint_ns``,
    ``checkpoint_id``, ``parent_checkpoint_id`` (blank: none), ``checkpoint`` (``type``,
    ``data``: without channel values), ``metadata``, the channel values it names
    (``blobs``) and its pending ``writes``, in the order LangGraph applies them."""

    checkpoint_ns = serializers.CharField(source="checkpoint.checkpoint_ns")
    checkpoint_id = serializers.CharField(source="checkpoint.checkpoint_id")
    parent_checkpoint_id = serializers.CharField(source="checkpoint.parent_checkpoint_id")
    checkpoint = serializers.SerializerMethodField()
    metadata = serializers.JSONField(source="checkpoint.metadata")
    blobs = BlobOutSerializer(many=True)
    writes = WriteOutSerializer(many=True)

    @extend_schema_field(SerializedSerializer)
    def get_checkpoint(self, record: Any) -> dict[str, str]:
        saved = record.checkpoint
        data = base64.b64encode(bytes(saved.checkpoint_data)).decode()
        return {"type": saved.checkpoint_type, "data": data}


class CheckpointPageSerializer(serializers.Serializer):
    """A page of a thread's checkpoints, newest first."""

    checkpoints = CheckpointOutSerializer(many=True)
