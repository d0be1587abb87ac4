"""State schemas in Django admin: superusers and project admins add the next version through
the service (audited), choosing a migration among the registered functions; nothing else
can be typed in as an import path, and versions are never changed or deleted."""

from __future__ import annotations

import json
from typing import Any

import pytest

from audit.models import AuditEvent
from projects.models import Project, default_project_id
from projects.roles import Role
from runs.models import StateSchema
from runs.state_migrations import state_migration
from testsupport.factories import make_user
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

ADD_URL = "/admin/runs/stateschema/add/"
SCHEMA = {"type": "object"}


@state_migration("ledger", 2)
def add_currency(state: dict[str, Any]) -> dict[str, Any]:
    """ledger v1 -> v2: amounts get a currency."""
    return {**state, "currency": "EUR"}


def add(client: Any, **fields: Any) -> Any:
    form = {
        "project": default_project_id(),
        "name": "ledger",
        "schema": json.dumps(SCHEMA),
        "migration_function": "",
        "migration_steps": "",
        **fields,
    }
    return client.post(ADD_URL, form)


def test_a_superuser_adds_versions_choosing_a_registered_migration(client, seeded):
    client.force_login(make_user("ada", superuser=True))
    page = client.get(ADD_URL)
    assert f"{__name__}.add_currency" in page.content.decode()
    assert add(client).status_code == 302
    assert add(client, migration_function=f"{__name__}.add_currency").status_code == 302
    versions = StateSchema.objects.filter(name="ledger").order_by("version")
    assert [(v.version, v.migration_function) for v in versions] == [
        (1, ""),
        (2, f"{__name__}.add_currency"),
    ]
    assert AuditEvent.objects.filter(verb="state_schema.created").count() == 2
    change = client.get(f"/admin/runs/stateschema/{versions[0].pk}/change/")
    assert change.status_code == 200
    assert b'name="_save"' not in change.content


def test_an_unregistered_path_or_an_unsafe_schema_is_a_form_error(client, seeded):
    client.force_login(make_user("ada", superuser=True))
    add(client)
    with assert_unchanged():
        typed = add(client, migration_function="os.system")
        unsafe = add(
            client, schema=json.dumps({"$ref": "file:///etc/passwd"}), migration_steps="[]"
        )
    assert typed.status_code == 200
    assert typed.context["adminform"].form.errors["migration_function"]
    assert unsafe.status_code == 200
    assert "file:///etc/passwd" in str(unsafe.context["adminform"].form.errors["schema"])


def test_a_project_admin_adds_only_in_their_projects_and_an_operator_not_at_all(client, seeded):
    admin = make_user("adam", Role.ADMIN)
    admin.is_staff = True
    admin.save()
    other = Project.objects.create(slug="other", name="Other")
    client.force_login(admin)
    with assert_unchanged():
        refused = add(client, project=other.pk)
    assert refused.context["adminform"].form.errors["project"]
    assert add(client).status_code == 302
    operator = make_user("olga", Role.OPERATOR)
    operator.is_staff = True
    operator.save()
    client.force_login(operator)
    assert client.get(ADD_URL).status_code == 403
