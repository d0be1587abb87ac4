"""Keyed hashes and signed chain heads.

Every event is rehashed with HMAC-SHA256 under ``AGENTOPS_AUDIT_KEY`` (it was plain SHA-256),
and each chain gets its ``AuditChainHead``, built from the events it holds (the system chain
one even without events). The append-only
trigger is disabled for the rehash only (the migration runs as the table's owner).
"""

from django.db import migrations, models

from audit.chain import GENESIS_HASH, head_signature, rehash_chains


def rehash(apps, schema_editor):
    head = apps.get_model("audit", "AuditChainHead")
    rehash_chains(apps.get_model("audit", "AuditEvent"), schema_editor.connection, head)
    # The system chain's head exists from the start: its row lock serializes the writers of
    # the system chain, which have no other row to lock.
    head.objects.get_or_create(
        chain="system",
        defaults={
            "events": 0,
            "last_event_id": 0,
            "last_hash": GENESIS_HASH,
            "signature": head_signature("system", 0, 0, GENESIS_HASH),
        },
    )


class Migration(migrations.Migration):
    dependencies = [("audit", "0003_event_project")]

    operations = [
        migrations.CreateModel(
            name="AuditChainHead",
            fields=[
                ("chain", models.CharField(max_length=64, primary_key=True, serialize=False)),
                ("events", models.BigIntegerField()),
                ("last_event_id", models.BigIntegerField()),
                ("last_hash", models.CharField(max_length=64)),
                ("signature", models.CharField(max_length=64)),
            ],
        ),
        migrations.RunPython(rehash, migrations.RunPython.noop),
    ]
