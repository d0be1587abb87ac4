"""Deleting memory: beat's purge deletes expired items (keeping an ``expire`` version) and
applies retention policies by namespace prefix and age (items, history, audit chains); a
subject's erasure deletes their items; run retention unlinks items from the runs it
deletes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agentops.actors import Actor
from audit.models import AuditChainHead, AuditEvent
from memory.models import MemoryItem, MemoryRetentionPolicy, MemoryVersion, memory_chain
from memory.provenance import Provenance
from memory.services import memory_delete, memory_put
from memory.tasks import purge
from projects.models import Project
from projects.roles import Role
from projects.services import project_default
from runs.models import RetentionPolicy, Run
from runs.retention import retention_purge
from tests.api.conftest import token_client
from tests.memory.conftest import PREFS, item_query, put_item
from testsupport.factories import make_user, plan_run

pytestmark = pytest.mark.django_db(transaction=True)
ACTOR = Actor.system("test")


def _put(namespace, key, **fields):
    return memory_put(
        actor=ACTOR,
        project=project_default(),
        namespace=namespace,
        key=key,
        value={"k": key},
        **fields,
    ).item


def _age(item_ids, days):
    then = timezone.now() - timedelta(days=days)
    MemoryItem.objects.filter(pk__in=item_ids).update(updated_at=then)
    MemoryVersion.objects.filter(item_id__in=item_ids).update(created_at=then)


def test_the_purge_deletes_expired_items_only_and_says_so(seeded):
    expired = _put(PREFS, "old", ttl_seconds=60)
    kept = _put(PREFS, "new", ttl_seconds=3600)
    forever = _put(PREFS, "forever")
    MemoryItem.objects.filter(pk=expired.pk).update(expires_at=timezone.now())
    counts = purge()
    assert counts["expired"] == 1
    assert set(MemoryItem.objects.values_list("pk", flat=True)) == {kept.pk, forever.pk}
    assert MemoryVersion.objects.get(item_id=expired.pk, operation="expire").value == {"k": "old"}
    assert AuditEvent.objects.filter(verb="memory.purged").get().payload["expired"] == 1
    assert purge()["expired"] == 0
    assert AuditEvent.objects.filter(verb="memory.purged").count() == 1


def test_a_policy_deletes_old_items_under_its_prefix_with_history_and_chains(seeded):
    old_policy = _put(["policies", "refunds"], "limit")
    old_other = _put(PREFS, "tone")
    new_policy = _put(["policies", "refunds"], "fresh")
    gone = _put(["policies", "x"], "gone")
    memory_delete(actor=ACTOR, project=project_default(), namespace=["policies", "x"], key="gone")
    _age([old_policy.pk, old_other.pk, gone.pk], days=40)
    MemoryRetentionPolicy.objects.create(
        name="policies", namespace_prefix="policies", max_age_days=30
    )
    counts = purge()
    assert counts["retained_items"] == 1
    assert set(MemoryItem.objects.values_list("pk", flat=True)) == {old_other.pk, new_policy.pk}
    assert not MemoryVersion.objects.filter(item_id__in=[old_policy.pk, gone.pk]).exists()
    for pk in (old_policy.pk, gone.pk):
        assert not AuditEvent.objects.filter(chain=memory_chain(pk)).exists()
        assert not AuditChainHead.objects.filter(chain=memory_chain(pk)).exists()
    assert AuditEvent.objects.filter(chain=memory_chain(old_other.pk)).exists()


def test_a_policy_of_another_project_leaves_this_one_alone(seeded):
    item = _put(PREFS, "tone")
    _age([item.pk], days=40)
    other = Project.objects.create(slug="elsewhere", name="Elsewhere")
    MemoryRetentionPolicy.objects.create(name="other", project=other, max_age_days=1)
    purge()
    assert MemoryItem.objects.filter(pk=item.pk).exists()


def test_erasing_a_subject_deletes_their_items_and_history_only(seeded):
    admin_api = token_client(make_user("ada", Role.OPERATOR, Role.REVIEWER))
    session = admin_api.post(
        "/api/v1/sessions/", {"external_id": "s1", "subject": "user-42"}, format="json"
    ).json()
    mine = put_item(admin_api, PREFS, "tone", {"style": "concise"}, session=session["id"]).json()
    assert mine["subject"] == "user-42"
    theirs = put_item(admin_api, PREFS, "other", {"x": 1}, subject="user-7").json()
    put_item(admin_api, PREFS, "tone", {"style": "long"})
    erased = admin_api.delete("/api/v1/subjects/user-42/").json()
    assert erased["memory_items"] == 1
    assert not MemoryItem.objects.filter(pk=mine["id"]).exists()
    assert not MemoryVersion.objects.filter(item_id=mine["id"]).exists()
    assert not AuditEvent.objects.filter(chain=memory_chain(mine["id"])).exists()
    assert MemoryItem.objects.filter(pk=theirs["id"]).exists()
    assert admin_api.get(item_query(PREFS, "tone")).status_code == 404


def test_run_retention_unlinks_the_items_a_deleted_run_wrote(
    operator, seeded, django_capture_on_commit_callbacks
):
    run = plan_run(
        operator,
        [{"tool": "calculate", "args": {"expression": "1"}}],
        capture=django_capture_on_commit_callbacks,
    )
    step = run.steps.get()
    item = memory_put(
        actor=ACTOR,
        project=run.project,
        namespace=PREFS,
        key="tone",
        value={"a": 1},
        provenance=Provenance(run_id=run.pk, step_id=step.pk, step_index=0),
    ).item
    Run.objects.filter(pk=run.pk).update(finished_at=timezone.now() - timedelta(days=10))
    RetentionPolicy.objects.create(name="all", ttl_days=1)
    retention_purge(actor=ACTOR)
    assert not Run.objects.filter(pk=run.pk).exists()
    item.refresh_from_db()
    assert (item.run_id, item.step_id) == (None, None)
    # The history keeps the ids it was written from.
    assert MemoryVersion.objects.get(item_id=item.pk).run_id == run.pk
