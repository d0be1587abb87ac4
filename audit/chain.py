"""The hash rule of the audit chain, shared by writing and verifying."""

import hashlib
import json
from typing import Any

GENESIS_HASH = "0" * 64

HASHED_FIELDS = (
    "created_at",
    "chain",
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
)


def event_hash(fields: dict[str, Any], prev_hash: str) -> str:
    """SHA-256 hex digest of the canonical JSON of ``fields`` (``HASHED_FIELDS``) and ``prev_hash``.

    Datetimes are hashed as ISO 8601 strings and UUIDs as their text, so the digest computed when
    writing equals the one recomputed from the stored row.
    """
    body = {name: fields[name] for name in HASHED_FIELDS}
    body["prev_hash"] = prev_hash
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()
