"""The OpenAPI schema generates without warnings and documents the API's paths."""

import pytest
import yaml
from django.core.management import call_command

from tests.api.conftest import token_client
from testsupport.factories import make_user

pytestmark = pytest.mark.django_db

PATHS = [
    "/api/v1/runs/",
    "/api/v1/runs/{id}/",
    "/api/v1/runs/{id}/steps/",
    "/api/v1/runs/{id}/complete/",
    "/api/v1/runs/{id}/cancel/",
    "/api/v1/runs/{id}/resume/",
    "/api/v1/runs/{id}/events/",
    "/api/v1/approvals/",
    "/api/v1/approvals/{id}/",
    "/api/v1/approvals/{id}/approve/",
    "/api/v1/approvals/{id}/reject/",
    "/api/v1/tools/",
]


def test_schema_validates_without_warnings(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    schema = yaml.safe_load(out.read_text())
    assert set(PATHS) <= set(schema["paths"])
    run_id = schema["paths"]["/api/v1/runs/{id}/"]["get"]["parameters"][0]
    assert run_id["schema"] == {"type": "string", "format": "uuid"}


def test_schema_endpoint_serves_it(seeded):
    response = token_client(make_user("reader", "viewer")).get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    assert set(PATHS) <= set(response.json()["paths"])
