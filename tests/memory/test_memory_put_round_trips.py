"""What a put costs on PostgreSQL, as libpq's own trace counts it: a new item four round trips
(BEGIN; the item's lock, its audit chain's head and an event id; the item, its search vector,
its version, its audit event and the chain's head; COMMIT), a replaced one five (its own
chain's head is read with the writes), each one commit; and the rows are those of the ORM."""

from __future__ import annotations

import pytest
from django.db import connection

from agentops.actors import Actor
from audit.models import AuditEvent
from audit.selectors import chain_verify
from memory.models import MemoryItem, MemoryVersion, memory_chain
from memory.selectors import memory_search
from memory.services import memory_put
from projects.models import Project
from testsupport.roundtrips import round_trips

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_put_costs_four_round_trips_new_and_five_replacing(operator):
    actor, project = Actor.for_user(operator), Project.objects.get(slug="default")
    where = {"actor": actor, "project": project, "namespace": ["user:42", "preferences"]}
    connection.ensure_connection()
    with round_trips(connection) as created:
        memory_put(**where, key="tone", value={"tone": "concise"})
    with round_trips(connection) as replaced:
        memory_put(**where, key="tone", value={"tone": "detailed technical answers"})
    assert (created.count, created.commits) == (4, 1)
    assert (replaced.count, replaced.commits) == (5, 1)

    item = MemoryItem.objects.get(key="tone")
    assert (item.version, item.value) == (2, {"tone": "detailed technical answers"})
    versions = MemoryVersion.objects.filter(item_id=item.pk).order_by("version")
    assert [v.value for v in versions] == [{"tone": "concise"}, item.value]
    events = AuditEvent.objects.filter(chain=memory_chain(item.pk)).order_by("pk")
    assert [(e.payload["before"], e.payload["after"]) for e in events] == [
        (None, {"tone": "concise"}),
        ({"tone": "concise"}, item.value),
    ]
    assert chain_verify(memory_chain(item.pk)).ok
    # The search vector follows the text in the same transaction.
    found = memory_search(
        project_id=item.project_id, namespace_prefix=["user:42"], query="technical"
    )
    assert [hit.item.pk for hit in found] == [item.pk]
