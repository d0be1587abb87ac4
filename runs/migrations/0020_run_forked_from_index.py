"""``Run.forked_from_index``: the step a fork started from, written by the server.

Forks made before it get theirs from the audit log, not from ``metadata["forked_from"]``
(which a client may write when it creates a run): the ``run.created`` event that
``runs.control.fork`` wrote names the source and the index, and only a run still linked to
that same source is filled. A run linked to a source by migration 0013 (from its metadata)
with no such event is no fork the server made: it keeps no index, and the pages show no fork.
"""

from django.db import migrations, models


def fill_from_audit(apps, schema_editor):
    AuditEvent = apps.get_model("audit", "AuditEvent")
    Run = apps.get_model("runs", "Run")
    created = AuditEvent.objects.filter(
        verb="run.created", object_type="run", payload__has_key="from_index"
    ).values_list("run_id", "payload")
    for run_id, payload in created.iterator():
        source, index = payload.get("forked_from"), payload.get("from_index")
        if isinstance(source, str) and isinstance(index, int) and index >= 0:
            Run.objects.filter(
                pk=run_id, forked_from_id=source, forked_from_index__isnull=True
            ).update(forked_from_index=index)


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0008_chain_link_unique"),
        ("runs", "0019_idempotency_key_per_project"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="forked_from_index",
            field=models.PositiveIntegerField(
                blank=True,
                editable=False,
                help_text="The index of the source run's step this fork started from (None: no fork).",
                null=True,
            ),
        ),
        migrations.RunPython(fill_from_audit, migrations.RunPython.noop),
    ]
