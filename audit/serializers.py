"""The one JSON shape of an audit event: the events API and the live streams both use it."""

from rest_framework import serializers

from audit.models import AuditEvent


class AuditEventSerializer(serializers.ModelSerializer[AuditEvent]):
    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "created_at",
            "run_id",
            "actor_kind",
            "actor_id",
            "actor_name",
            "verb",
            "object_type",
            "object_id",
            "from_state",
            "to_state",
            "payload",
            "prev_hash",
            "hash",
        ]
        read_only_fields = fields
