"""The OpenAPI schema generates without warnings and documents the API's paths."""

from typing import Any

import pytest
import yaml
from django.core.management import call_command

from agentops.serializers import FieldsBuiltOnce
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


def test_every_operation_documents_the_refusals_it_can_answer(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--file", str(out))
    schema = yaml.safe_load(out.read_text())
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            parameters = {p["name"]: p["in"] for p in operation.get("parameters", [])}
            expected = {"401", "403"}
            if operation.get("requestBody") or set(parameters.values()) - {"path"}:
                expected.add("400")
            if "path" in parameters.values():
                expected.add("404")
            if operation.get("requestBody"):
                expected.add("415")
            if "Idempotency-Key" in parameters:
                expected |= {"409", "422"}
            responses = operation["responses"]
            assert expected <= set(responses), (method, path)
            for code in expected:
                body = responses[code]["content"]["application/json"]["schema"]
                assert body == {"$ref": "#/components/schemas/Error"}, (method, path, code)
    assert set(schema["paths"]["/api/v1/runs/"]["post"]["requestBody"]["content"]) == {
        "application/json"
    }


def test_request_bodies_document_what_their_serializers_refuse(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--file", str(out))
    components = yaml.safe_load(out.read_text())["components"]["schemas"]
    assert components["CreateRunRequest"]["properties"]["goal"]["minLength"] == 1
    assert components["StepInputRequest"]["properties"]["tool"]["minLength"] == 1
    messages = components["MessagesInputRequest"]["properties"]["messages"]
    assert (messages["minItems"], messages["maxItems"]) == (1, 200)
    assert components["OutcomeEnum"]["enum"] == ["unknown"]
    assert components["ForkRunRequest"]["properties"]["args"]["nullable"] is True


def test_steps_and_reports_document_tool_errors(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--file", str(out))
    components = yaml.safe_load(out.read_text())["components"]["schemas"]
    for name in ("Step", "StepSummary"):
        field = components[name]["properties"]["tool_error"]
        assert (field["type"], field["readOnly"]) == ("boolean", True), name
    assert components["StepReportRequest"]["properties"]["is_error"]["type"] == "boolean"


def test_fields_built_once_describe_what_drf_s_own_fields_describe(tmp_path, monkeypatch):
    ours = tmp_path / "ours.yaml"
    call_command("spectacular", "--file", str(ours))

    def drf_fields(self: FieldsBuiltOnce) -> Any:
        return super(FieldsBuiltOnce, self).get_fields()

    monkeypatch.setattr(FieldsBuiltOnce, "get_fields", drf_fields)
    drf = tmp_path / "drf.yaml"
    call_command("spectacular", "--file", str(drf))
    assert ours.read_text() == drf.read_text()
