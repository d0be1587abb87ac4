"""Migration runs 0020 gives forks made before it their ``forked_from_index`` from the audit
event the fork wrote, never from the run's client-written metadata: a run linked to a source
only by its metadata (as migration 0013 linked them) gets no index, and shows no fork."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from agentops.actors import Actor
from runs.control.create import run_create
from runs.control.fork import run_fork
from runs.models import Run
from tests.pages.conftest import CALCULATE

pytestmark = [pytest.mark.long, pytest.mark.django_db(transaction=True)]


def _migrate(targets: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def test_forks_get_their_index_from_the_audit_log_not_from_metadata(
    operator, django_capture_on_commit_callbacks
):
    actor = Actor.for_user(operator)
    with django_capture_on_commit_callbacks(execute=True):
        source = run_create(actor=actor, agent="plan", goal="g", steps=[CALCULATE, CALCULATE])
    with django_capture_on_commit_callbacks(execute=True):
        fork = run_fork(run_id=source.pk, actor=actor, from_index=1)
        forged = run_create(
            actor=actor,
            agent="plan",
            goal="forged",
            steps=[CALCULATE],
            metadata={"forked_from": {"run": str(source.pk), "index": 0}},
        )
    # As migration 0013 linked runs by their metadata.
    Run.objects.filter(pk=forged.pk).update(forked_from=source)
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()

    _migrate([("runs", "0019_idempotency_key_per_project")])
    _migrate(latest)

    assert Run.objects.get(pk=fork.pk).forked_from_index == 1
    assert Run.objects.get(pk=forged.pk).forked_from_index is None
    assert Run.objects.get(pk=source.pk).forked_from_index is None
