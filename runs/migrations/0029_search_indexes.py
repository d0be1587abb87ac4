"""GIN indexes of the runs list's full-text search (``runs.search``), PostgreSQL only.

Each index's expression is ``runs.search.TextDocument`` of a column, written out here as it
was when this migration was made. Built ``CONCURRENTLY`` (so outside a transaction): writes
of steps and messages go on while a large table is indexed. SQLite (the quick start) gets
none: its search is a plain substring match.
"""

from django.db import migrations

# (index name, table, column) of each searched column.
_INDEXES = [
    ("run_goal_search_idx", "runs_run", "goal"),
    ("step_args_search_idx", "runs_step", "args"),
    ("step_result_search_idx", "runs_step", "result"),
    ("message_content_search_idx", "runs_message", "content"),
    ("message_calls_search_idx", "runs_message", "tool_calls"),
]
_DOCUMENT = "to_tsvector('simple'::regconfig, left(({column})::text, 100000))"


def _create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, table, column in _INDEXES:
        schema_editor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {table} "
            f"USING gin (({_DOCUMENT.format(column=column)}))"
        )


def _drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, _table, _column in _INDEXES:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("runs", "0028_saved_views")]

    operations = [migrations.RunPython(_create, _drop)]
