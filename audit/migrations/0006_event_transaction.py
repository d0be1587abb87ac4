"""Record on each audit event the id of the transaction that wrote it (PostgreSQL only).

The column ``xact_id`` (``xid8``) is filled by its default, ``pg_current_xact_id()``, so the
writer (``audit.services``, ``agentops.rows.insert``) names no new column: it is not a field of
the model. ``audit.streams`` orders the cross-run live streams by (``xact_id``, ``id``) and
hands out only events whose transaction is older than every transaction still in progress,
so a client resuming ``?after=`` an event never skips one that committed later with a smaller
id. The rows already stored get the migrating transaction's id: all of them committed before
it, so the order among them stays their id order.

SQLite (a quick local start) has one writer at a time, so commit order is id order there and
no column is needed.
"""

from django.db import migrations

FORWARD = [
    "ALTER TABLE audit_auditevent ADD COLUMN xact_id xid8 NOT NULL DEFAULT pg_current_xact_id()",
    "CREATE INDEX audit_xact_idx ON audit_auditevent (xact_id, id)",
]
BACKWARD = [
    "DROP INDEX audit_xact_idx",
    "ALTER TABLE audit_auditevent DROP COLUMN xact_id",
]


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in FORWARD:
            schema_editor.execute(statement)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in BACKWARD:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("audit", "0005_retention_role")]

    operations = [migrations.RunPython(forward, backward)]
