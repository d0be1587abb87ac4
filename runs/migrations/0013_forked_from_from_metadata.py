"""Fill ``Run.forked_from`` of runs forked before it existed, from ``metadata["forked_from"]``
(only where the source run still exists)."""

from django.db import migrations


def link_forks(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    forks = Run.objects.filter(metadata__has_key="forked_from", forked_from__isnull=True)
    for run in forks.only("id", "metadata").iterator():
        source = (run.metadata.get("forked_from") or {}).get("run")
        if source and Run.objects.filter(pk=source).exists():
            Run.objects.filter(pk=run.pk).update(forked_from_id=source)


class Migration(migrations.Migration):
    dependencies = [("runs", "0012_run_forked_from_retention_purges")]

    operations = [migrations.RunPython(link_forks, migrations.RunPython.noop)]
