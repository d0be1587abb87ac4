"""Attacks on the audit log by whoever can reach the database, and what catches each.

As the tables' owner (triggers off): deleting the newest events of a chain or a whole chain,
rewriting an event with plain SHA-256 or a wrong key's HMAC recomputed for it and every later
event, forging a head, deleting a head: ``verify_audit`` reports each. As any other role: the
purge flag, DELETE, a head moved back and TRUNCATE are refused by the database, and nothing
changes. Retention, the only legitimate deleter, still purges and leaves a log that verifies.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from django.core.management import CommandError
from django.db import DatabaseError, IntegrityError, connection, transaction

from agentops.actors import Actor
from audit import services
from audit.chain import HASHED_FIELDS, event_hash, head_signature
from audit.models import PURGE_VERB, AuditChainHead, AuditEvent
from audit.selectors import audit_verify, chain_verify
from audit.services import audit_purge_chains, audit_record
from runs.models import Run
from tests.audit.attacks import tamper, verify_audit, verify_output

pytestmark = pytest.mark.django_db

INTRUDER = "audit_test_intruder"


def _chain(run: Run) -> str:
    return f"run:{run.pk}"


def _snapshot() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every audit row, to show that a refused action changed nothing."""
    events = list(AuditEvent.objects.order_by("id").values_list("id", "hash", "payload"))
    heads = list(AuditChainHead.objects.order_by("chain").values_list())
    return events, heads


def _plain_sha256(fields: dict[str, Any], prev_hash: str) -> str:
    """The rule before keyed hashes: what an attacker without the key can compute."""
    body = {name: fields[name] for name in HASHED_FIELDS}
    body["prev_hash"] = prev_hash
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _rewrite(chain: str, event_id: int, payload: dict[str, Any], hasher: Any) -> None:
    """Rewrite one event's payload and recompute, with ``hasher``, the hashes of it and every
    later event of its chain, and move the head's last hash along (its signature cannot be)."""
    prev = AuditEvent.objects.get(pk=event_id).prev_hash
    for event in AuditEvent.objects.filter(chain=chain, id__gte=event_id).order_by("id"):
        if event.pk == event_id:
            event.payload = payload
        fields = {name: getattr(event, name) for name in HASHED_FIELDS}
        new_hash = hasher(fields, prev)
        tamper(
            "UPDATE audit_auditevent SET payload = %s::jsonb, prev_hash = %s, hash = %s "
            "WHERE id = %s",
            [json.dumps(event.payload), prev, new_hash, event.pk],
        )
        prev = new_hash
    tamper("UPDATE audit_auditchainhead SET last_hash = %s WHERE chain = %s", [prev, chain])


def test_a_finished_run_has_a_signed_head_matching_its_chain(finished_run):
    chain = _chain(finished_run)
    head = AuditChainHead.objects.get(chain=chain)
    newest = AuditEvent.objects.filter(chain=chain).latest("id")
    assert head.events == AuditEvent.objects.filter(chain=chain).count()
    assert (head.last_event_id, head.last_hash) == (newest.pk, newest.hash)
    assert head.signature == head_signature(chain, head.events, newest.pk, newest.hash)
    assert all(report.ok for report in audit_verify())


def test_deleting_the_newest_events_of_a_chain_is_reported(finished_run):
    chain = _chain(finished_run)
    newest = list(AuditEvent.objects.filter(chain=chain).order_by("-id")[:2])
    tamper("DELETE FROM audit_auditevent WHERE id IN (%s, %s)", [e.pk for e in newest])
    report = chain_verify(chain)
    assert not report.ok
    assert report.broken_at is None
    assert "the newest events were deleted" in report.reason
    failed, out = verify_output()
    assert failed
    assert f"BROKEN {chain}: the head records" in out


def test_deleting_a_whole_chain_is_reported(finished_run):
    chain = _chain(finished_run)
    tamper("DELETE FROM audit_auditevent WHERE chain = %s", [chain])
    report = chain_verify(chain)
    assert (report.ok, report.events) == (False, 0)
    assert "the chain was deleted" in report.reason
    failed, out = verify_output()
    assert failed
    assert f"BROKEN {chain}: the head records" in out
    failed, out = verify_output("--run", str(finished_run.pk))
    assert failed
    assert "the chain was deleted" in out


def test_deleting_a_chain_and_its_head_without_a_purge_record_is_not_seen(finished_run):
    """The limit of any check inside the database, as ``chain_verify`` says."""
    chain = _chain(finished_run)
    tamper("DELETE FROM audit_auditevent WHERE chain = %s", [chain])
    tamper("DELETE FROM audit_auditchainhead WHERE chain = %s", [chain])
    assert chain not in {report.chain for report in audit_verify()}


_COPY_EVENT = (
    "INSERT INTO audit_auditevent (created_at, chain, run_id, project_id, actor_kind, actor_id, "
    "actor_name, verb, object_type, object_id, from_state, to_state, payload, prev_hash, hash) "
    "SELECT created_at, chain, run_id, project_id, actor_kind, actor_id, actor_name, verb, "
    "object_type, object_id, from_state, to_state, {payload}, prev_hash, {hash} "
    "FROM audit_auditevent WHERE id = %s"
)


@pytest.mark.parametrize(
    ("payload", "new_hash"),
    [("payload", "hash"), ("'{\"forged\": true}'::jsonb", "md5(hash) || md5(hash)")],
    ids=["a-copy", "a-second-successor"],
)
def test_the_database_refuses_a_copied_event_and_a_fork_of_a_chain(finished_run, payload, new_hash):
    """An event inserted after the one it copies or with another event's predecessor (two
    successors of one event: a fork), even with triggers off, is refused: one successor per
    event (the unique ``chain, prev_hash``)."""
    newest = AuditEvent.objects.filter(chain=_chain(finished_run)).latest("id")
    before = _snapshot()
    sql = _COPY_EVENT.format(payload=payload, hash=new_hash)
    with pytest.raises(DatabaseError, match="audit_chain_link_uniq"):
        tamper(sql, [newest.pk])
    assert _snapshot() == before


def test_deleting_a_head_is_reported_as_events_without_a_head(finished_run):
    chain = _chain(finished_run)
    tamper("DELETE FROM audit_auditchainhead WHERE chain = %s", [chain])
    report = chain_verify(chain)
    assert "no chain head" in report.reason
    assert verify_output()[0]


@pytest.mark.parametrize(
    "hasher",
    [_plain_sha256, lambda fields, prev: event_hash(fields, prev, key="a guessed key")],
    ids=["plain-sha256", "wrong-key-hmac"],
)
def test_rewriting_an_event_and_every_later_hash_is_reported(finished_run, hasher):
    chain = _chain(finished_run)
    decision = AuditEvent.objects.get(chain=chain, verb="approval.decision")
    _rewrite(chain, decision.pk, {**decision.payload, "decision": "reject"}, hasher)
    report = chain_verify(chain)
    assert report.broken_at == decision.pk
    assert "hash does not match" in report.reason
    failed, out = verify_output()
    assert failed
    assert f"BROKEN {chain}: at event {decision.pk}: hash does not match" in out


def test_a_head_forged_without_the_key_is_reported(finished_run):
    """Delete the newest event and move the head back to match, signed with a guessed key."""
    chain = _chain(finished_run)
    newest, kept = AuditEvent.objects.filter(chain=chain).order_by("-id")[:2]
    tamper("DELETE FROM audit_auditevent WHERE id = %s", [newest.pk])
    head = AuditChainHead.objects.get(chain=chain)
    forged = head_signature(chain, head.events - 1, kept.pk, kept.hash, key="a guessed key")
    tamper(
        "UPDATE audit_auditchainhead SET events = events - 1, last_event_id = %s, "
        "last_hash = %s, signature = %s WHERE chain = %s",
        [kept.pk, kept.hash, forged, chain],
    )
    report = chain_verify(chain)
    assert "signature does not verify" in report.reason
    failed, out = verify_output()
    assert failed
    assert f"BROKEN {chain}: the chain head's signature does not verify" in out


def test_verify_audit_prints_a_line_per_broken_chain(finished_run, operator):
    chain = _chain(finished_run)
    tamper("DELETE FROM audit_auditchainhead WHERE chain = %s", [chain])
    tamper("UPDATE audit_auditchainhead SET signature = %s WHERE chain = 'system'", ["0" * 64])
    failed, out = verify_output()
    assert failed
    lines = [line for line in out.splitlines() if line.startswith("BROKEN")]
    assert len(lines) == 2
    assert lines[0].startswith(f"BROKEN {chain}: ")
    assert lines[1].startswith("BROKEN system: ")
    assert out.splitlines()[-1].endswith(": 2 broken")


def test_the_owner_cannot_move_a_head_back_or_delete_it_with_triggers_on(finished_run):
    chain = _chain(finished_run)
    before = _snapshot()
    for sql in (
        "UPDATE audit_auditchainhead SET events = events - 1 WHERE chain = %s",
        "UPDATE audit_auditchainhead SET last_hash = 'x' WHERE chain = %s",
        "DELETE FROM audit_auditchainhead WHERE chain = %s",
    ):
        with (
            pytest.raises(DatabaseError, match="only move forward"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(sql, [chain])
    assert _snapshot() == before


@pytest.mark.parametrize("table", ["audit_auditevent", "audit_auditchainhead"])
def test_truncate_is_refused(finished_run, table):
    before = _snapshot()
    with (
        pytest.raises(DatabaseError, match="TRUNCATE refused"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(f"TRUNCATE {table} CASCADE")
    assert _snapshot() == before


@pytest.fixture
def intruder(finished_run) -> str:
    """A plain role (not a member of the retention role) with every privilege on the audit
    tables; created inside the test's transaction, so gone after it."""
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE ROLE {INTRUDER} NOLOGIN")
        cursor.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE "
            f"ON audit_auditevent, audit_auditchainhead TO {INTRUDER}"
        )
        cursor.execute(f"GRANT USAGE ON SCHEMA public TO {INTRUDER}")
    return INTRUDER


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM audit_auditevent WHERE chain LIKE 'run:%%'",
        "DELETE FROM audit_auditchainhead WHERE chain LIKE 'run:%%'",
        "TRUNCATE audit_auditevent",
        "TRUNCATE audit_auditchainhead",
        "UPDATE audit_auditevent SET verb = 'x'",
        "UPDATE audit_auditchainhead SET events = 0",
    ],
)
def test_a_role_outside_the_retention_role_setting_the_purge_flag_is_refused(intruder, sql):
    before = _snapshot()

    def as_intruder_with_the_purge_flag() -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL ROLE {intruder}")
            cursor.execute("SET LOCAL agentops.audit_purge = 'on'")
            cursor.execute(sql)

    with pytest.raises(DatabaseError, match="refused"):
        as_intruder_with_the_purge_flag()
    assert _snapshot() == before


def test_retention_cannot_purge_from_a_role_outside_the_retention_role(intruder, finished_run):
    """The application logged in as a role that is not a member: switching to the retention
    role is refused, so is the purge."""
    before = _snapshot()

    def purge_as_intruder() -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL SESSION AUTHORIZATION {intruder}")
            audit_purge_chains(chains=[_chain(finished_run)], batch_size=10)

    with pytest.raises(DatabaseError, match='permission denied to set role "agentops_retention"'):
        purge_as_intruder()
    assert _snapshot() == before


def test_retention_purges_chains_on_record_and_the_log_still_verifies(finished_run):
    chain = _chain(finished_run)
    events = AuditEvent.objects.filter(chain=chain).count()
    deleted, _ = audit_purge_chains(chains=[chain], batch_size=3, actor=Actor.system("retention"))
    assert deleted == events
    assert not AuditEvent.objects.filter(chain=chain).exists()
    assert not AuditChainHead.objects.filter(chain=chain).exists()
    record = AuditEvent.objects.get(verb=PURGE_VERB)
    assert (record.chain, record.actor_name) == ("system", "retention")
    assert record.payload == {"chains": {chain: events}}
    assert all(report.ok for report in audit_verify())
    assert "0 broken" in verify_audit()
    with pytest.raises(CommandError, match="purged by retention"):
        verify_audit("--run", str(finished_run.pk))
    # The purge ran as the retention role and switched back: this connection writes again.
    with transaction.atomic():
        audit_record(actor=Actor.system(), verb="after.purge", object_type="x", object_id=1)
    assert chain_verify("system").ok


def test_what_an_interrupted_purge_leaves_verifies(finished_run, monkeypatch):
    """The purge record and the head deletion commit first; the events may outlive them."""
    chain = _chain(finished_run)
    monkeypatch.setattr(services, "_DELETE_NEWEST", "SELECT %s::text, %s::int WHERE false")
    audit_purge_chains(chains=[chain], batch_size=3)
    assert AuditEvent.objects.filter(chain=chain).exists()
    assert not AuditChainHead.objects.filter(chain=chain).exists()
    report = chain_verify(chain)
    assert (report.ok, report.purged) == (True, True)


def test_a_writer_that_lost_a_race_for_a_new_chain_rolls_back(finished_run, monkeypatch):
    """Two first writers of a chain without a head: the second one's first event would be a
    second successor of the chain's start, which the database refuses."""
    monkeypatch.setattr(services, "_read_heads", lambda chains: {})
    before = _snapshot()
    with pytest.raises(IntegrityError, match="audit_chain_link_uniq"), transaction.atomic():
        audit_record(
            actor=Actor.system(), verb="x", object_type="x", object_id=1, run_id=finished_run.pk
        )
    assert _snapshot() == before
