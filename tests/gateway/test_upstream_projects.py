"""MCP upstreams belong to a project's policy: only that project's tokens reach one (anyone
else is answered as for an upstream that does not exist), and assigning or removing one in
admin is a change of the project's policy, in its audit chain with its diff."""

from __future__ import annotations

import pytest
from django.test import Client

from audit.models import AuditEvent, project_chain
from gateway.admission import Admitted, admit
from gateway.models import Upstream
from gateway.services import upstream_register
from projects.models import Project
from testsupport.factories import make_token, make_user

pytestmark = pytest.mark.django_db

ADDRESS = "203.0.113.9"


@pytest.fixture
def alpha(seeded: None) -> Project:
    return Project.objects.create(slug="alpha", name="Alpha")


def test_only_the_owning_projects_tokens_reach_its_upstream(alpha):
    upstream = upstream_register(name="alpha-bank", command="true")
    Upstream.objects.filter(pk=upstream.pk).update(project=alpha)
    ours = make_token(make_user("al", "operator", project=alpha), alpha)
    theirs = make_token(make_user("ot", "operator"))
    assert isinstance(admit("alpha-bank", f"Bearer {ours}", ADDRESS), Admitted)
    refused = admit("alpha-bank", f"Bearer {theirs}", ADDRESS)
    missing = admit("no-such-bank", f"Bearer {theirs}", ADDRESS)
    assert not isinstance(refused, Admitted)
    assert not isinstance(missing, Admitted)
    assert refused[0] == missing[0] == 404
    assert refused[1] == "no MCP upstream 'alpha-bank'"


def test_assigning_an_upstream_in_admin_is_audited_in_the_projects_chain(alpha):
    upstream = upstream_register(name="moved-bank", command="true")
    client = Client()
    client.force_login(make_user("root", superuser=True))
    form = {"name": "moved-bank", "project": alpha.pk, "transport": "stdio", "command": "true"}
    form |= {"url": "", "headers": "{}", "enabled": "on"}
    response = client.post(f"/admin/gateway/upstream/{upstream.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    (event,) = AuditEvent.objects.filter(chain=project_chain(alpha.pk))
    assert event.verb == "policy.mcp_upstream_changed"
    assert event.payload["before"] is None
    assert event.payload["after"]["name"] == "moved-bank"
    assert {"op": "add", "path": "/project", "value": alpha.pk} in event.payload["diff"]
    alpha.refresh_from_db()
    assert alpha.policy_version == 1
    # Taking it away is a change of alpha's policy too: it leaves alpha's policy.
    client.post(f"/admin/gateway/upstream/{upstream.pk}/change/", {**form, "project": ""})
    removed = AuditEvent.objects.filter(chain=project_chain(alpha.pk)).order_by("pk").last()
    assert removed is not None
    assert removed.payload["after"] is None
    assert removed.payload["before"]["project"] == alpha.pk
