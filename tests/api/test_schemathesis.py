"""Property-based tests of the whole API against its own OpenAPI schema (Schemathesis).

Every operation of ``/api/schema/`` gets generated requests, valid and invalid (strings with
NUL and unpaired surrogates, huge numbers, wrong types, missing fields, crafted headers), sent
in-process to the WSGI application as an operator who is also a reviewer; every check
Schemathesis has runs on each answer: no 5xx, a status the schema documents for the operation,
a body and content type that match what it documents for that status, invalid input refused,
valid input accepted, authentication enforced.

Path parameters mostly name real objects (a client run with a ready client step, a pending
approval of a run someone else requested, an open session), so bodies reach the services
instead of stopping at a 404; the rest keep their generated values. The example count is
bounded and the generation derandomized: the same requests on every run.
"""

from __future__ import annotations

import os
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from agentops.actors import Actor
from projects.roles import Role
from projects.services import project_default
from runs.control.create import run_create, step_append
from runs.control.sessions import session_create
from runs.models import Executor
from testsupport.factories import make_token, make_user, run_awaiting_approval

# Examples per operation: enough to reach every field with a hostile value, few enough for the
# file to run in well under a minute on two shared cores (AGENTOPS_FUZZ_EXAMPLES searches
# deeper, e.g. 300 before a release).
MAX_EXAMPLES = int(os.environ.get("AGENTOPS_FUZZ_EXAMPLES", "25"))


def _accepting(*statuses: str) -> dict[str, Any]:
    return {"checks": {"positive_data_acceptance": {"expected-statuses": ["2xx", *statuses]}}}


# Input the schema admits may still be refused where the schema cannot say what is valid: the
# services check POST bodies beyond it (arguments against the tool's own schema, a plan run
# needs steps, a transcript's tool calls have results), generated POSTs reuse an
# Idempotency-Key with another body (422), and a list's cursor is valid only as a page link
# made it (400), and a list's filters given empty and an erasure's project slug that names no
# project of the caller are refused (400). Every other answer to schema-valid input must be a
# success or a documented refusal of state (401, 403, 404, 409); a state write's also a stale
# If-Match (412).
CONFIG = SchemathesisConfig.from_dict(
    {
        "seed": 0,
        "operations": [
            {"include-method": "POST", **_accepting("400", "401", "403", "404", "409", "422")},
            {
                "include-name": [
                    "GET /api/v1/runs/",
                    "GET /api/v1/approvals/",
                    "GET /api/v1/state-schemas/",
                    "GET /api/v1/sessions/",
                    "GET /api/v1/artifacts/",
                    "DELETE /api/v1/subjects/{subject}/",
                    "GET /api/v1/threads/checkpoints/",
                ],
                **_accepting("400", "401", "403"),
            },
            # A memory item's namespace labels and project slug are checked beyond the schema
            # (400), and a generated If-Match rarely names the current version (412).
            {
                "include-path": "/api/v1/memory/items/",
                **_accepting("400", "401", "403", "404", "412", "413"),
            },
            # A state write is made against the version its If-Match names: a generated one
            # rarely names the current version (412), and a JSON Patch may not apply (409).
            # Without If-Match it is 428 Precondition Required (RFC 6585 §3), not a 400.
            {
                "include-path-regex": "/state/$",
                "include-method": ["PUT", "PATCH"],
                "checks": {
                    **_accepting("400", "401", "403", "404", "409", "412", "413", "415", "428")[
                        "checks"
                    ],
                    "missing_required_header": {"expected-statuses": ["428"]},
                },
            },
        ],
    }
)

schema = schemathesis.openapi.from_wsgi(
    "/api/schema/?format=json", get_wsgi_application(), config=CONFIG
)


@pytest.fixture
def _test_connection_kept() -> Iterator[None]:
    """Keep the test's database connection (and its transaction) open across requests, as
    Django's test client does: the WSGI handler closes connections when a request ends."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@dataclass
class World:
    """The objects generated requests may name, and the API user's token key."""

    token: str
    run_id: str
    step_id: int
    approval_id: int
    session_id: str


@pytest.fixture
def world(seeded: None, django_capture_on_commit_callbacks: Any) -> World:
    requester = make_user("olivia", Role.OPERATOR)
    caller = make_user("omar", Role.OPERATOR, Role.REVIEWER)
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(actor=Actor.for_user(caller), agent="client", goal="fuzzed")
        step = step_append(
            actor=Actor.for_user(caller),
            run_id=run.pk,
            tool="lookup",
            args={},
            executor=Executor.CLIENT,
        )
    waiting = run_awaiting_approval(requester, capture=django_capture_on_commit_callbacks)
    session = session_create(
        actor=Actor.for_user(caller), project=project_default(), external_id="fuzzed"
    )
    return World(
        session_id=str(session.pk),
        token=make_token(caller),
        run_id=str(run.pk),
        step_id=step.pk,
        approval_id=waiting.steps.get().approval.pk,
    )


def _is_valid_id(value: Any, *, run: bool) -> bool:
    if run:
        try:
            uuid.UUID(str(value))
        except ValueError:
            return False
        return True
    return isinstance(value, int) and not isinstance(value, bool)


def _name_real_objects(case: Any, world: World) -> None:
    """Replace three in four generated path ids by a real object's (chosen from the generated
    value, so the choice is as deterministic as the generation). An id that is itself the
    invalid input under test (not a UUID, not an integer) is kept: replacing it would turn a
    request the API must refuse into a valid one."""
    params = case.path_parameters
    if not params or zlib.crc32(repr(sorted(params.items())).encode()) % 4 == 0:
        return
    approvals = case.path.startswith("/api/v1/approvals/")
    if not _is_valid_id(params.get("id"), run=not approvals):
        return
    if "step_id" in params:
        if not _is_valid_id(params["step_id"], run=False):
            return
        params["step_id"] = world.step_id
    if approvals:
        params["id"] = world.approval_id
    elif case.path.startswith("/api/v1/sessions/"):
        params["id"] = world.session_id
    else:
        params["id"] = world.run_id


@pytest.mark.django_db
@pytest.mark.usefixtures("_test_connection_kept")
@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_schema(case, world):
    _name_real_objects(case, world)
    case.call_and_validate(headers={"Authorization": f"Token {world.token}"})
