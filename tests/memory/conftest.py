"""Memory API helpers: clients per role and project, and the item URLs."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest

from projects.models import Project
from projects.roles import Role
from tests.api.conftest import token_client
from testsupport.factories import make_user

ITEMS_URL = "/api/v1/memory/items/"
SEARCH_URL = "/api/v1/memory/search/"
NAMESPACES_URL = "/api/v1/memory/namespaces/"
PREFS = ["project", "user:42", "preferences"]


def item_query(namespace: list[str] | str, key: str, **extra: Any) -> str:
    """``/api/v1/memory/items/?namespace=...&key=...`` (labels joined by ``.``)."""
    joined = namespace if isinstance(namespace, str) else ".".join(namespace)
    return f"{ITEMS_URL}?{urlencode({'namespace': joined, 'key': key, **extra})}"


def put_item(api: Any, namespace: list[str], key: str, value: Any, **fields: Any) -> Any:
    headers = {}
    if "if_match" in fields:
        headers["HTTP_IF_MATCH"] = fields.pop("if_match")
    body = {"namespace": namespace, "key": key, "value": value, **fields}
    return api.put(ITEMS_URL, body, format="json", **headers)


@pytest.fixture
def other_project(db: None) -> Project:
    return Project.objects.create(slug="other", name="Other")


@pytest.fixture
def outsider_api(seeded: None, other_project: Project) -> Any:
    """An operator of another project, with that project's token."""
    user = make_user("oscar", Role.OPERATOR, project=other_project)
    return token_client(user, other_project)


@pytest.fixture
def viewer_api(seeded: None) -> Any:
    return token_client(make_user("vera", Role.VIEWER))


@pytest.fixture
def operator_api(operator: Any) -> Any:
    return token_client(operator)


@pytest.fixture
def reviewer_api(reviewer: Any) -> Any:
    return token_client(reviewer)
