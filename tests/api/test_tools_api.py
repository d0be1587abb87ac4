"""GET /api/v1/tools/ lists the registered tools with their schema and risk."""

import pytest
from rest_framework.test import APIClient

from runs.tools import all_tools

pytestmark = pytest.mark.django_db


def test_tools_are_listed_with_schema_and_risk(reviewer_api):
    response = reviewer_api.get("/api/v1/tools/")
    assert response.status_code == 200
    tools = response.json()
    assert [t["name"] for t in tools] == [t.name for t in all_tools()]
    by_name = {t["name"]: t for t in tools}
    calculate = by_name["calculate"]
    assert calculate["risk"] == "low"
    assert calculate["schema"]["required"] == ["expression"]
    assert calculate["side_effects"] is False
    email = by_name["send_email"]
    assert (email["risk"], email["side_effects"], email["max_attempts"]) == ("high", True, 1)
    assert set(email) == {
        "name",
        "description",
        "schema",
        "risk",
        "side_effects",
        "idempotent",
        "timeout_seconds",
        "max_attempts",
    }


def test_tools_need_credentials(seeded):
    assert APIClient().get("/api/v1/tools/").status_code == 401
