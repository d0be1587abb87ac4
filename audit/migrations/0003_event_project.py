"""Add ``project_id`` to audit events and to their hashed fields, so rehash every chain.

The append-only trigger is disabled for the rehash only (the migration runs as the table's
owner) and enabled again in the same transaction.
"""

from django.db import migrations, models

from audit.chain import rehash_chains


def rehash(apps, schema_editor):
    rehash_chains(apps.get_model("audit", "AuditEvent"), schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("audit", "0002_append_only")]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="project_id",
            field=models.BigIntegerField(
                blank=True,
                help_text="The run's project (a copied id); empty for the system",
                null=True,
            ),
        ),
        migrations.RunPython(rehash, migrations.RunPython.noop),
    ]
