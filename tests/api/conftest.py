"""API clients signed in as each role (token auth, like a client app) and run helpers."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from projects.roles import Role
from testsupport.factories import make_token, make_user, token_api

RUNS_URL = "/api/v1/runs/"
APPROVALS_URL = "/api/v1/approvals/"

EMAIL_ARGS = {"to": ["a@example.com"], "subject": "hi", "body": "x"}


def token_client(user: Any, project: Any = None) -> APIClient:
    """An API client sending ``Authorization: Token <token>`` for ``user``, with a token of
    ``project`` (default: the default project)."""
    return token_api(make_token(user, project))


def run_url(run_id: Any, action: str = "") -> str:
    return f"{RUNS_URL}{run_id}/{action + '/' if action else ''}"


def approval_url(approval_id: Any, action: str = "") -> str:
    return f"{APPROVALS_URL}{approval_id}/{action + '/' if action else ''}"


@pytest.fixture
def operator_api(operator) -> APIClient:
    return token_client(operator)


@pytest.fixture
def reviewer_api(reviewer) -> APIClient:
    return token_client(reviewer)


@pytest.fixture
def second_reviewer_api(second_reviewer) -> APIClient:
    return token_client(second_reviewer)


@pytest.fixture
def operator_reviewer(seeded: None):
    """A user holding both roles: may create runs and decide approvals."""
    return make_user("omar", Role.OPERATOR, Role.REVIEWER)


def post_run(client: APIClient, **body: Any) -> Any:
    """POST a run as JSON and return the response."""
    return client.post(RUNS_URL, body, format="json")


def plan_body(*steps: dict[str, Any], goal: str = "a plan") -> dict[str, Any]:
    return {"agent": "plan", "goal": goal, "steps": list(steps)}


def calc(expression: str = "1+1") -> dict[str, Any]:
    return {"tool": "calculate", "args": {"expression": expression}}


def email_step() -> dict[str, Any]:
    return {"tool": "send_email", "args": EMAIL_ARGS, "rationale": "tell the customer"}
