"""Migration runs 0020 gives forks made before it their ``forked_from_index`` from the audit
event the fork wrote, never from the run's client-written metadata: a run linked to a source
only by its metadata (as migration 0013 linked them) gets no index, and shows no fork."""

from __future__ import annotations

from django.utils import timezone

from runs.models import Run
from testsupport.migration_history import migrate_to_before, migrate_to_latest

BEFORE = [("runs", "0019_idempotency_key_per_project")]


def test_forks_get_their_index_from_the_audit_log_not_from_metadata(empty_database):
    old = migrate_to_before(BEFORE)
    old_run = old.get_model("runs", "Run")
    source = old_run.objects.create(goal="g", agent="plan")
    fork = old_run.objects.create(
        goal="g",
        agent="plan",
        forked_from=source,
        metadata={"forked_from": {"run": str(source.pk), "index": 1}},
    )
    # Linked by its metadata, as migration 0013 linked runs.
    forged = old_run.objects.create(
        goal="forged",
        agent="plan",
        forked_from=source,
        metadata={"forked_from": {"run": str(source.pk), "index": 0}},
    )
    # The ``run.created`` events ``run_create`` and ``run_fork`` wrote before 0020 (commit
    # 06b6813's parent): only the fork's names a source and an index. Each run's chain starts
    # here; the migration reads no hash.
    created = {
        source: {"agent": "plan", "goal": "g"},
        fork: {"agent": "plan", "forked_from": str(source.pk), "from_index": 1},
        forged: {"agent": "plan", "goal": "forged"},
    }
    for run, payload in created.items():
        old.get_model("audit", "AuditEvent").objects.create(
            created_at=timezone.now(),
            chain=f"run:{run.pk}",
            run_id=run.pk,
            project_id=run.project_id,
            actor_kind="user",
            verb="run.created",
            object_type="run",
            object_id=str(run.pk),
            to_state="queued",
            payload=payload,
            prev_hash="0" * 64,
            hash=f"{run.pk.int:064x}",
        )

    migrate_to_latest()

    assert Run.objects.get(pk=fork.pk).forked_from_index == 1
    assert Run.objects.get(pk=forged.pk).forked_from_index is None
    assert Run.objects.get(pk=source.pk).forked_from_index is None
