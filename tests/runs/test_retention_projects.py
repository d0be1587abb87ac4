"""Retention policies belong to a project's policy: a project's own policy applies to its runs
only, a global one to the runs of every project without an enabled policy of its own, and
setting a project's policy in admin is audited in the project's chain with its diff."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from audit.models import AuditEvent, project_chain
from projects.models import Project, default_project_id
from runs.models import RetentionPolicy, RunStatus
from runs.retention import retention_candidates
from testsupport.factories import make_user, run_row

pytestmark = pytest.mark.django_db

NOW = timezone.now()
OLD = NOW - timedelta(days=40)


def test_a_projects_own_policy_overrides_the_global_one_for_its_runs(seeded):
    alpha = Project.objects.create(slug="alpha", name="Alpha")
    in_alpha = run_row(RunStatus.SUCCEEDED, project=alpha, finished_at=OLD)
    in_default = run_row(RunStatus.SUCCEEDED, project_id=default_project_id(), finished_at=OLD)
    general = RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    assert set(retention_candidates(general, now=NOW)) == {in_alpha, in_default}
    own = RetentionPolicy.objects.create(name="alpha: 90 days", ttl_days=90, project=alpha)
    # Alpha keeps its runs 90 days: the global policy no longer touches them.
    assert list(retention_candidates(general, now=NOW)) == [in_default]
    assert list(retention_candidates(own, now=NOW)) == []
    assert list(retention_candidates(own, now=NOW + timedelta(days=60))) == [in_alpha]
    own.enabled = False
    own.save()
    assert set(retention_candidates(general, now=NOW)) == {in_alpha, in_default}


def test_a_projects_retention_policy_set_in_admin_is_audited_in_its_chain(seeded):
    alpha = Project.objects.create(slug="alpha", name="Alpha")
    client = Client()
    client.force_login(make_user("root", superuser=True))
    form = {"name": "alpha: 7 days", "project": alpha.pk, "enabled": "on", "ttl_days": 7}
    form |= {"statuses": ["succeeded", "failed"], "agent": "", "action": "delete"}
    response = client.post("/admin/runs/retentionpolicy/add/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    (event,) = AuditEvent.objects.filter(chain=project_chain(alpha.pk))
    assert event.verb == "policy.retention_policy_changed"
    assert event.payload["before"] is None
    assert event.payload["after"]["ttl_days"] == 7
    alpha.refresh_from_db()
    assert alpha.policy_version == 1
