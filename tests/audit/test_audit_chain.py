"""The audit log is append-only in the database and its hash chains expose tampering."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction

from audit.models import AuditEvent
from audit.selectors import chain_verify, chains
from tests.audit.attacks import tamper, verify_audit

pytestmark = pytest.mark.django_db


def test_chains_verify_after_a_run(finished_run):
    report = chain_verify(f"run:{finished_run.pk}")
    assert report.ok
    assert report.events == AuditEvent.objects.filter(run_id=finished_run.pk).count()
    assert chains(run_id=finished_run.pk) == [f"run:{finished_run.pk}"]
    assert "0 broken" in verify_audit()
    assert "verified 1 chains" in verify_audit("--run", str(finished_run.pk))


def test_update_of_an_audit_event_is_refused_by_the_database(finished_run):
    event = AuditEvent.objects.filter(run_id=finished_run.pk).first()
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            "UPDATE audit_auditevent SET payload = '{}'::jsonb WHERE id = %s", [event.pk]
        )
    assert AuditEvent.objects.get(pk=event.pk).payload == event.payload


def test_delete_of_an_audit_event_is_refused_by_the_database(finished_run):
    count = AuditEvent.objects.count()
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("DELETE FROM audit_auditevent WHERE run_id = %s", [finished_run.pk])
    assert AuditEvent.objects.count() == count


def test_edited_payload_breaks_the_chain_at_that_event(finished_run):
    chain = f"run:{finished_run.pk}"
    event = AuditEvent.objects.get(chain=chain, verb="approval.decision")
    tamper(
        'UPDATE audit_auditevent SET payload = payload || \'{"decision": "reject"}\'::jsonb '
        "WHERE id = %s",
        [event.pk],
    )
    report = chain_verify(chain)
    assert report.broken_at == event.pk
    assert "hash does not match" in report.reason
    out = StringIO()
    with pytest.raises(CommandError, match="1 of 2 audit chains are broken"):
        call_command("verify_audit", stdout=out)
    assert f"BROKEN {chain}: at event {event.pk}" in out.getvalue()


def test_deleted_event_breaks_the_chain_at_the_next_one(finished_run):
    chain = f"run:{finished_run.pk}"
    _, second, third = AuditEvent.objects.filter(chain=chain).order_by("id")[:3]
    tamper("DELETE FROM audit_auditevent WHERE id = %s", [second.pk])
    report = chain_verify(chain)
    assert report.broken_at == third.pk
    assert "prev_hash" in report.reason
    with pytest.raises(CommandError):
        verify_audit("--run", str(finished_run.pk))


def test_verify_audit_refuses_a_bad_or_unknown_run(seeded):
    with pytest.raises(CommandError, match="not a UUID"):
        verify_audit("--run", "nope")
    with pytest.raises(CommandError, match="no audit events"):
        verify_audit("--run", "00000000-0000-0000-0000-000000000000")
