"""Memory pages: browse a project's namespaces and search its items, an item's history and
provenance (links to the run and step that wrote it), delete with a reason; scoped per
project and role; hostile stored values render as text."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agentops.actors import Actor
from audit.models import AuditEvent
from memory.models import MemoryItem, MemoryRetentionPolicy, MemoryVersion
from memory.provenance import Provenance
from memory.services import memory_put
from projects.models import Project
from projects.roles import Role
from projects.services import project_default
from tests.memory.conftest import PREFS
from testsupport.factories import make_user, plan_run
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db
ACTOR = Actor.system("test")


def _put(namespace, key, value, project=None, **fields):
    return memory_put(
        actor=ACTOR,
        project=project or project_default(),
        namespace=namespace,
        key=key,
        value=value,
        **fields,
    ).item


def test_browse_lists_the_next_namespace_level_and_the_items_under_it(client, operator):
    _put(PREFS, "tone", {"style": "concise"})
    _put(["project", "user:7", "facts"], "city", {"city": "Lyon"})
    _put(["other"], "k", {"x": 1})
    client.force_login(operator)
    page = client.get(reverse("memory-browse"), {"namespace": "project"}).content.decode()
    assert "project.user:42" in page
    assert "project.user:7" in page
    assert 'data-memory-key="tone"' in page
    assert 'data-memory-key="city"' in page
    assert 'data-memory-key="k"' not in page
    found = client.get(reverse("memory-browse"), {"q": "Lyon"}).content.decode()
    assert 'data-memory-key="city"' in found
    assert 'data-memory-key="tone"' not in found


def test_a_bad_namespace_is_said_on_the_page(client, operator):
    client.force_login(operator)
    response = client.get(reverse("memory-browse"), {"namespace": "a..b"})
    assert response.status_code == 400
    assert "data-memory-problem" in response.content.decode()


def test_the_item_page_shows_history_with_provenance_links_and_changes(
    client, operator, django_capture_on_commit_callbacks
):
    run = plan_run(
        operator,
        [{"tool": "calculate", "args": {"expression": "1"}}],
        capture=django_capture_on_commit_callbacks,
    )
    step = run.steps.get()
    item = _put(PREFS, "tone", {"style": "concise"})
    memory_put(
        actor=ACTOR,
        project=project_default(),
        namespace=PREFS,
        key="tone",
        value={"style": "long"},
        provenance=Provenance(run_id=run.pk, step_id=step.pk, step_index=0),
    )
    client.force_login(operator)
    page = client.get(reverse("memory-item", args=[item.pk])).content.decode()
    assert f'href="/runs/{run.pk}/#step-0"' in page
    assert 'data-diff-path="/style"' in page
    assert page.count('data-version-operation="put"') == 2


def test_delete_with_a_reason_keeps_it_in_the_history(client, operator):
    item = _put(PREFS, "tone", {"style": "concise"})
    client.force_login(operator)
    url = reverse("memory-item-delete", args=[item.pk])
    with assert_unchanged(live_streams=False):
        client.post(url, {"reason": ""})
    client.post(url, {"reason": "the user asked", "etag": item.etag})
    assert not MemoryItem.objects.filter(pk=item.pk).exists()
    page = client.get(reverse("memory-item", args=[item.pk])).content.decode()
    assert "data-memory-gone" in page
    assert "the user asked" in page
    assert MemoryVersion.objects.get(item_id=item.pk, operation="delete").reason == (
        "the user asked"
    )


def test_viewers_see_but_may_not_delete(client, seeded):
    item = _put(PREFS, "tone", {"style": "concise"})
    client.force_login(make_user("vera", Role.VIEWER))
    page = client.get(reverse("memory-item", args=[item.pk])).content.decode()
    assert "data-memory-delete" not in page
    with assert_unchanged(live_streams=False):
        response = client.post(reverse("memory-item-delete", args=[item.pk]), {"reason": "x"})
    assert response.status_code == 403


def test_another_projects_memory_is_a_404(client, seeded):
    other = Project.objects.create(slug="other", name="Other")
    item = _put(PREFS, "secret", {"x": 1}, project=other)
    client.force_login(make_user("olga", Role.OPERATOR))
    assert client.get(reverse("memory-item", args=[item.pk])).status_code == 404
    with assert_unchanged(live_streams=False):
        response = client.post(reverse("memory-item-delete", args=[item.pk]), {"reason": "x"})
    assert response.status_code == 404
    assert client.get(reverse("memory-browse"), {"project": "other"}).status_code == 404


def test_hostile_stored_values_render_as_text(client, operator):
    deep: dict = {}
    node = deep
    for _ in range(60):
        node["n"] = {}
        node = node["n"]
    hostile = "<script>alert(1)</script>"
    item = _put([hostile.replace(".", "")], hostile, {"html": hostile, "deep": deep}, text=hostile)
    client.force_login(operator)
    for url in (reverse("memory-item", args=[item.pk]), reverse("memory-browse")):
        response = client.get(url)
        assert response.status_code == 200
        assert hostile not in response.content.decode()


def test_admin_lists_memory_and_audits_retention_policies(client, seeded):
    item = _put(PREFS, "tone", {"style": "concise"})
    client.force_login(make_user("ada", superuser=True))
    for url in (
        "/admin/memory/memoryitem/",
        f"/admin/memory/memoryitem/{item.pk}/change/",
        "/admin/memory/memoryversion/",
        "/admin/memory/memoryretentionpolicy/",
    ):
        assert client.get(url).status_code == 200, url
    add = "/admin/memory/memoryretentionpolicy/add/"
    form = {"name": "policies", "enabled": "on", "namespace_prefix": "a..b", "max_age_days": 30}
    refused = client.post(add, form)
    assert refused.status_code == 200
    assert not MemoryRetentionPolicy.objects.exists()
    client.post(add, {**form, "namespace_prefix": "policies"})
    policy = MemoryRetentionPolicy.objects.get()
    assert policy.namespace_prefix == "policies"
    assert AuditEvent.objects.filter(verb="admin.memoryretentionpolicy.added").exists()
