"""MCP session ids leave the runs' metadata, which every viewer of a project reads: the
gateway keeps them in ``McpSession`` alone (issue 29). Reversed, they are put back from there."""

from django.db import migrations

BATCH = 500


def _rewrite(apps, change):
    """Apply ``change(run)`` (True when it changed the run's metadata) to every MCP run,
    saving the changed ones in batches."""
    Run = apps.get_model("runs", "Run")
    changed = []
    for run in Run.objects.filter(agent="mcp").only("id", "metadata").iterator(chunk_size=BATCH):
        if change(run):
            changed.append(run)
        if len(changed) >= BATCH:
            Run.objects.bulk_update(changed, ["metadata"])
            changed = []
    Run.objects.bulk_update(changed, ["metadata"])


def forget_session_ids(apps, schema_editor):
    def forget(run):
        mcp = (run.metadata or {}).get("mcp")
        return isinstance(mcp, dict) and mcp.pop("session", None) is not None

    _rewrite(apps, forget)


def restore_session_ids(apps, schema_editor):
    McpSession = apps.get_model("gateway", "McpSession")
    sessions = dict(McpSession.objects.values_list("run_id", "session_id"))

    def restore(run):
        mcp = (run.metadata or {}).get("mcp")
        if not isinstance(mcp, dict) or run.pk not in sessions:
            return False
        mcp["session"] = sessions[run.pk]
        return True

    _rewrite(apps, restore)


class Migration(migrations.Migration):
    dependencies = [
        ("gateway", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(forget_session_ids, restore_session_ids),
    ]
