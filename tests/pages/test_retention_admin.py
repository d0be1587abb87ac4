"""Retention in Django admin: a policy's preview counts what it would take, "Run now" starts
a purge in a Celery task (eager here) whose page shows its progress, and purges are listed."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from agentops.actors import Actor
from audit.models import AuditEvent
from runs import purges
from runs.models import RetentionPolicy, RetentionPurge, Run
from runs.retention import retention_preview
from testsupport.factories import make_user, plan_run, run_awaiting_approval

pytestmark = pytest.mark.django_db

CALCULATE = {"tool": "calculate", "args": {"expression": "1+1"}}


@pytest.fixture
def admin_client(client, seeded):
    client.force_login(make_user("ada", superuser=True))
    return client


@pytest.fixture
def runs_by_age(operator, django_capture_on_commit_callbacks):
    """Two runs finished 50 and 40 days ago (3 and 2 steps), one 5 days ago, and one waiting
    for an approval since 60 days."""
    capture = django_capture_on_commit_callbacks
    now = timezone.now()
    found = {}
    for name, steps, days in (("oldest", 3, 50), ("old", 2, 40), ("recent", 1, 5)):
        run = plan_run(operator, [CALCULATE] * steps, capture=capture, goal=name)
        finished = now - timedelta(days=days)
        Run.objects.filter(pk=run.pk).update(finished_at=finished)
        found[name] = (run, finished)
    pending = run_awaiting_approval(operator, capture=capture)
    Run.objects.filter(pk=pending.pk).update(
        created_at=now - timedelta(days=60), finished_at=now - timedelta(days=60)
    )
    found["pending"] = (pending, None)
    return found


def test_the_preview_counts_what_the_policy_would_delete(runs_by_age):
    policy = RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    (oldest, oldest_at), (old, old_at) = runs_by_age["oldest"], runs_by_age["old"]
    preview = retention_preview(policy=policy)
    assert (preview.action, preview.runs, preview.steps) == ("delete", 2, 5)
    assert preview.events == AuditEvent.objects.filter(run_id__in=[oldest.pk, old.pk]).count()
    assert preview.events > 0
    assert (preview.oldest, preview.newest) == (oldest_at, old_at)
    assert Run.objects.count() == 4


def test_admin_previews_and_runs_a_policy(
    admin_client, runs_by_age, django_capture_on_commit_callbacks
):
    policy = RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    url = reverse("admin:runs_retentionpolicy_preview", args=[policy.pk])
    listing = admin_client.get(reverse("admin:runs_retentionpolicy_changelist")).content.decode()
    assert f'href="{url}"' in listing
    html = admin_client.get(url).content.decode()
    assert 'data-preview="runs">2<' in html
    assert 'data-preview="steps">5<' in html
    assert runs_by_age["oldest"][1].strftime("%Y-%m-%d %H:%M:%S") in html
    assert 'data-action="run-now"' in html

    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(url)

    purge = RetentionPurge.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:runs_retentionpurge_change", args=[purge.pk])
    assert (purge.status, purge.runs, purge.steps, purge.started_by_name) == (
        "succeeded",
        2,
        5,
        "ada",
    )
    assert set(Run.objects.values_list("goal", flat=True)) == {"recent", "mail the customer"}
    page = admin_client.get(response["Location"]).content.decode()
    assert 'data-purge-status="succeeded"' in page
    assert 'http-equiv="refresh"' not in page
    history = admin_client.get(reverse("admin:runs_retentionpurge_changelist")).content.decode()
    assert "30 days" in history
    assert "ada" in history
    assert "data-purge-history" in admin_client.get(url).content.decode()


def test_an_open_purge_page_refreshes_and_blocks_run_now(admin_client, operator):
    policy = RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    purge = purges.purge_start(actor=Actor.for_user(operator), policy_id=policy.pk)
    RetentionPurge.objects.filter(pk=purge.pk).update(steps=7)
    page = admin_client.get(reverse("admin:runs_retentionpurge_change", args=[purge.pk]))
    html = page.content.decode()
    assert '<meta http-equiv="refresh" content="2">' in html
    assert 'data-purge-status="queued"' in html
    url = reverse("admin:runs_retentionpolicy_preview", args=[policy.pk])
    assert 'data-action="run-now"' not in admin_client.get(url).content.decode()
    # A stale form posted anyway: refused with a message, nothing started.
    response = admin_client.post(url, follow=True)
    assert "another retention purge is queued or running" in response.content.decode()
    assert RetentionPurge.objects.count() == 1


def test_staff_without_the_change_permission_cannot_run_a_policy(client, runs_by_age):
    policy = RetentionPolicy.objects.create(name="30 days", ttl_days=30)
    viewer = make_user("vera")
    viewer.is_staff = True
    viewer.save()
    viewer.user_permissions.add(Permission.objects.get(codename="view_retentionpolicy"))
    client.force_login(viewer)
    url = reverse("admin:runs_retentionpolicy_preview", args=[policy.pk])
    assert client.get(url).status_code == 200
    assert client.post(url).status_code == 403
    assert not RetentionPurge.objects.exists()
    assert Run.objects.count() == 4
    nobody = make_user("nick")
    nobody.is_staff = True
    nobody.save()
    client.force_login(nobody)
    assert client.get(url).status_code == 403


def test_an_unknown_policy_is_404(admin_client):
    url = reverse("admin:runs_retentionpolicy_preview", args=[999999])
    assert admin_client.get(url).status_code == 404
