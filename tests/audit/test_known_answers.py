"""The audit hash against known answers: a fixed event's hash and a fixed head's signature
written out here, every hashed field part of the hash, and the verifier catching an edit of
each stored field.

The writer and the verifier share ``audit.chain``; these answers were computed once, apart
from the code, from the rule in ``audit.models``' docstrings: HMAC-SHA256, keyed with
``AGENTOPS_AUDIT_KEY`` (here ``KEY``, as UTF-8), of the canonical JSON (sorted keys, no
spaces) of the event's fields and ``prev_hash``, datetimes and UUIDs as their text; of the
head's chain, events, last_event_id and last_hash.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection, transaction

from audit.chain import GENESIS_HASH, event_hash, head_signature, rehash_chains
from audit.models import AuditChainHead, AuditEvent
from audit.selectors import chain_verify

pytestmark = pytest.mark.django_db

KEY = "known-answer-test-key"


@pytest.fixture(autouse=True)
def _known_key(settings) -> None:
    settings.AGENTOPS_AUDIT_KEY = KEY


RUN_ID = uuid.UUID("00000000-0000-4000-8000-000000000001")
FIELDS: dict[str, Any] = {
    "created_at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    "chain": f"run:{RUN_ID}",
    "run_id": RUN_ID,
    "project_id": 3,
    "actor_kind": "user",
    "actor_id": "7",
    "actor_name": "rita",
    "verb": "approval.approved",
    "object_type": "approval",
    "object_id": "42",
    "from_state": "pending",
    "to_state": "approved",
    "payload": {"comment": "ok", "amount": 12.5},
}
# Computed with the standard library alone, not this code:
# python3 -c 'import hmac, hashlib; print(hmac.new(b"known-answer-test-key", MESSAGE,
# hashlib.sha256).hexdigest())' where MESSAGE is b'{"actor_id":"7","actor_kind":"user",
# "actor_name":"rita","chain":"run:00000000-0000-4000-8000-000000000001","created_at":
# "2026-01-02 03:04:05+00:00","from_state":"pending","object_id":"42","object_type":"approval",
# "payload":{"amount":12.5,"comment":"ok"},"prev_hash":"000...000" (64 zeros),"project_id":3,
# "run_id":"00000000-0000-4000-8000-000000000001","to_state":"approved",
# "verb":"approval.approved"}' on one line. (Its plain SHA-256, the rule before keyed hashes,
# was db7b645329e3102df58294f34b9eacfa7c115fe265ca05024ad31042a09b03bd.)
KNOWN_HASH = "3c58c097fe6e67f61fc4c99d33d822cab208924ebc1f22d3ffe01f9ac58d927a"
# The same way, MESSAGE b'{"chain":"run:00000000-0000-4000-8000-000000000001","events":1,
# "last_event_id":42,"last_hash":"' + KNOWN_HASH + b'"}': the head of that chain holding
# that event alone, as event 42.
KNOWN_SIGNATURE = "11dee5b484e9864683d3a04642d32910c1968b1de200e6acbf9d88961dd06dcc"
# Every field of an audit event that the hash must cover, written out (not the code's list).
HASHED = [
    "created_at",
    "chain",
    "run_id",
    "project_id",
    "actor_kind",
    "actor_id",
    "actor_name",
    "verb",
    "object_type",
    "object_id",
    "from_state",
    "to_state",
    "payload",
]
CHANGED: dict[str, Any] = {
    "created_at": datetime(2026, 1, 2, 3, 4, 6, tzinfo=UTC),
    "chain": "system",
    "run_id": uuid.UUID("00000000-0000-4000-8000-000000000002"),
    "project_id": 4,
    "actor_kind": "api_client",
    "actor_id": "8",
    "actor_name": "ravi",
    "verb": "approval.rejected",
    "object_type": "step",
    "object_id": "43",
    "from_state": "approved",
    "to_state": "rejected",
    "payload": {"comment": "ok", "amount": 12.6},
}


def test_a_fixed_event_hashes_to_the_known_answer():
    assert event_hash(FIELDS, GENESIS_HASH) == KNOWN_HASH


def test_a_fixed_head_signs_to_the_known_answer():
    assert head_signature(FIELDS["chain"], 1, 42, KNOWN_HASH) == KNOWN_SIGNATURE


def test_the_previous_hash_and_the_key_are_part_of_the_hash():
    assert event_hash(FIELDS, "f" * 64) != KNOWN_HASH
    assert event_hash(FIELDS, GENESIS_HASH, key="another key") != KNOWN_HASH


@pytest.mark.parametrize(
    "changed",
    [
        ("run:other", 1, 42, KNOWN_HASH),
        (FIELDS["chain"], 2, 42, KNOWN_HASH),
        (FIELDS["chain"], 1, 43, KNOWN_HASH),
        (FIELDS["chain"], 1, 42, "f" * 64),
    ],
)
def test_every_value_of_a_head_changes_its_signature(changed):
    assert head_signature(*changed) != KNOWN_SIGNATURE


@pytest.mark.parametrize("name", HASHED)
def test_every_hashed_field_changes_the_hash(name):
    assert event_hash({**FIELDS, name: CHANGED[name]}, GENESIS_HASH) != KNOWN_HASH


def _store() -> AuditEvent:
    """The fixed event and its chain's head, as the writer leaves them."""
    event = AuditEvent.objects.create(**FIELDS, prev_hash=GENESIS_HASH, hash=KNOWN_HASH)
    AuditChainHead.objects.create(
        chain=FIELDS["chain"],
        events=1,
        last_event_id=event.pk,
        last_hash=KNOWN_HASH,
        signature=head_signature(FIELDS["chain"], 1, event.pk, KNOWN_HASH),
    )
    return event


def test_the_stored_event_with_the_known_hash_verifies():
    _store()
    report = chain_verify(FIELDS["chain"])
    assert (report.ok, report.events) == (True, 1)


@pytest.mark.parametrize("name", [n for n in HASHED if n != "chain"])
def test_an_edit_of_any_stored_field_is_reported(name):
    event = _store()
    column = AuditEvent._meta.get_field(name).column
    value = CHANGED[name]
    if name == "payload":
        value = '{"comment": "ok", "amount": 12.6}'
    with transaction.atomic(), connection.cursor() as cursor:
        # As the table's owner with triggers off: the append-only trigger is not the defence
        # here, the hash is.
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute(
            f"UPDATE audit_auditevent SET {column} = %s WHERE id = %s",  # noqa: S608
            [str(value) if name == "run_id" else value, event.pk],
        )
    report = chain_verify(FIELDS["chain"])
    assert not report.ok
    assert report.broken_at == event.pk


def test_rehashing_rewrites_every_chain_under_the_current_rule():
    """What a migration that changes the hash rule does: hashes written under an old rule
    (here: garbage) become the current rule's, chain by chain, and the trigger is back on."""
    first = AuditEvent.objects.create(**FIELDS, prev_hash="a" * 64, hash="b" * 64)
    second = AuditEvent.objects.create(**{**FIELDS, "chain": "other"}, prev_hash="c", hash="d")
    assert not chain_verify(FIELDS["chain"]).ok
    assert rehash_chains(AuditEvent, connection, AuditChainHead) == 2
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.prev_hash, first.hash) == (GENESIS_HASH, KNOWN_HASH)
    assert chain_verify(FIELDS["chain"]).ok
    assert chain_verify("other").ok
    head = AuditChainHead.objects.get(chain=FIELDS["chain"])
    assert (head.events, head.last_event_id, head.last_hash) == (1, first.pk, KNOWN_HASH)
    with pytest.raises(Exception, match="append-only"), transaction.atomic():
        AuditEvent.objects.filter(pk=first.pk).update(verb="x")
