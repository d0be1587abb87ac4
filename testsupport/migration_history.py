"""Taking an empty database through the project's migration history, forward only: to the
schema it had when some migrations were their apps' newest (rows are written there with the
historical models), then to the newest schema, as ``manage.py migrate`` upgrades a deployment.

Going forward from an empty database is much cheaper than going back on the test database:
Django unapplies a migration only after rendering the models of every migration before it,
and then must apply them all again (the gate test took 32.6 s of CPU going back and forth,
9.2 s forward from empty). Use it on a database of the test's own
(``testsupport.database.scratch_database``).
"""

from __future__ import annotations

import gc

from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.state import StateApps

MigrationKey = tuple[str, str]


def migrate_to_before(targets: list[MigrationKey]) -> StateApps:
    """Apply, on the empty database of Django's default connection, every migration but those
    that came after ``targets`` in their apps and those depending on them: the schema the
    database would have after ``manage.py migrate <app> <name>`` took it back to each target
    (Django unapplies the same set). They are applied in the order a fresh database's
    ``migrate`` applies them.

    ``targets`` holds ``(app label, migration name)`` pairs, e.g. ``[("runs",
    "0004_retention_policies")]``. Returns the historical models of every app at that state
    (``apps.get_model("runs", "Run")``).

    Raises:
        KeyError: a target is no migration.
    """
    # The models an earlier trip rendered live on in reference cycles until a full collection,
    # which a test process's large heap makes rare; each FSM field among them keeps a
    # ``class_prepared`` receiver (django-fsm) that every model rendered here would call.
    gc.collect()
    executor = MigrationExecutor(connection)
    graph = executor.loader.graph
    later: set[MigrationKey] = set()
    for app, name in targets:
        for child in graph.node_map[(app, name)].children:
            if child[0] == app:
                later.update(graph.backwards_plan(child))
    full_plan = executor.migration_plan(graph.leaf_nodes(), clean_start=True)
    plan = [(m, False) for m, _ in full_plan if (m.app_label, m.name) not in later]
    executor.migrate(targets, plan=plan)
    applied = {(m.app_label, m.name) for m, _ in plan}
    newest = sorted(k for k in applied if not applied.intersection(graph.node_map[k].children))
    # Rendered anew: the models of the state ``migrate`` returns may point at superseded
    # versions of the models they relate to.
    return executor.loader.project_state(newest).apps


def migrate_to_latest() -> None:
    """Apply every migration not applied yet to the database of Django's default connection,
    as ``manage.py migrate`` does (its plan: every app's newest migration)."""
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
