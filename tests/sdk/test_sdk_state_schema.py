"""The Python SDK with a state schema, against a real agentops (daphne, PostgreSQL): a run
declares the schema, a write that violates it raises ``BadRequest`` naming path and rule, and
an old state is read upgraded (``upgraded_from``)."""

from __future__ import annotations

import pytest
from agentops_client import BadRequest, Client

from agentops.actors import Actor
from projects.models import Project, default_project_id
from runs.control.state_schemas import state_schema_create
from testsupport.factories import make_token, make_user

pytestmark = pytest.mark.django_db(transaction=True)

V1 = {"type": "object", "properties": {"seats": {"type": "integer"}}}


def test_a_declared_schema_refuses_bad_writes_and_old_states_read_upgraded(asgi_server, seeded):
    project = Project.objects.get(pk=default_project_id())
    actor = Actor.system("test")
    state_schema_create(actor=actor, project=project, name="booking", schema=V1)
    agent = Client(asgi_server.url, make_token(make_user("agent", "operator")), websocket=False)
    try:
        run_id = agent.create_run("book", state_schema={"name": "booking"}).id
        start = agent.get_state(run_id)
        with pytest.raises(BadRequest, match="seats: 'two' is not of type 'integer'"):
            agent.put_state(run_id, {"seats": "two"}, base=start)
        written = agent.put_state(run_id, {"seats": 2}, base=start)
        assert (written.schema_version, written.upgraded_from) == (1, None)
        steps = [{"op": "default", "path": "/cabin", "value": "economy"}]
        state_schema_create(
            actor=actor, project=project, name="booking", schema=V1, migration_steps=steps
        )
        read = agent.get_state(run_id)
        assert (read.state, read.schema_version, read.upgraded_from) == (
            {"seats": 2, "cabin": "economy"},
            2,
            1,
        )
    finally:
        agent.close()
