"""A client's ``args_schema`` is the client's text run in our processes: its references never
leave the schema (no request goes out, no local file is read), it cannot loop or backtrack
without end, and whatever is wrong with it is a 400 that changes nothing (issue 29, items 1, 5
and 8)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from approvals.models import ApprovalRequest
from runs.models import Run, Step
from runs.tools import schema_invalid, schema_problem
from runs.tools.schemas import MAX_SCHEMA_DEPTH
from tests.api.conftest import approval_url, run_url, token_client
from testsupport.factories import make_run
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

SECRET = "SECRET-7f3a"


class _Upstream(BaseHTTPRequestHandler):
    hits: list[str]

    def do_GET(self) -> None:
        self.hits.append(self.path)
        body = json.dumps({"type": "string", "const": SECRET}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/schema+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def schema_server() -> Iterator[tuple[str, list[str]]]:
    """An HTTP server on 127.0.0.1 serving a schema that holds ``SECRET``, and the paths it
    was asked for."""
    hits: list[str] = []
    handler = type("Handler", (_Upstream,), {"hits": hits})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def api(operator):
    return token_client(operator)


@pytest.fixture
def run(operator, django_capture_on_commit_callbacks) -> Run:
    return make_run(
        operator, agent="client", goal="airline desk", capture=django_capture_on_commit_callbacks
    )


def append(api, run: Run, schema: Any, args: Any, tool: str = "lookup"):
    return api.post(
        run_url(run.pk, "steps"),
        {"tool": tool, "args": args, "executor": "client", "args_schema": schema},
        format="json",
    )


def test_a_remote_reference_is_refused_without_a_request(api, run, schema_server):
    base, hits = schema_server
    for schema in (
        {"$ref": f"{base}/schema.json"},
        {"type": "object", "properties": {"code": {"$ref": f"{base}/code.json"}}},
        # A relative reference against an outside base URI is outside too.
        {"$id": f"{base}/root.json", "properties": {"code": {"$ref": "code.json"}}},
    ):
        with assert_unchanged():
            response = append(api, run, schema, {"code": "x"})
        assert response.status_code == 400, response.json()
        assert "does not resolve inside the schema" in response.json()["detail"]
        assert SECRET not in response.content.decode()
    assert hits == []


def test_a_file_reference_reads_no_file(api, run, tmp_path: Path):
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"type": "string", "const": SECRET}))
    with assert_unchanged():
        response = append(
            api, run, {"properties": {"code": {"$ref": secret.as_uri()}}}, {"code": "x"}
        )
    assert response.status_code == 400
    assert SECRET not in response.content.decode()


def test_references_inside_the_schema_still_resolve(api, run, django_capture_on_commit_callbacks):
    schema = {
        "$id": "https://tools.example/lookup",
        "$defs": {
            "code": {"type": "string", "pattern": "^[A-Z]{6}$"},
            "embedded": {"$id": "embedded", "type": "integer", "minimum": 1},
        },
        "type": "object",
        "properties": {"code": {"$ref": "#/$defs/code"}, "count": {"$ref": "embedded"}},
        "required": ["code"],
    }
    bad_code = append(api, run, schema, {"code": "abc", "count": 2})
    bad_count = append(api, run, schema, {"code": "ABCDEF", "count": 0})
    assert bad_code.status_code == bad_count.status_code == 400
    assert bad_code.json()["detail"] == "step.args: code: 'abc' does not match '^[A-Z]{6}$'"
    assert bad_count.json()["detail"] == "step.args: count: 0 is less than the minimum of 1"
    with django_capture_on_commit_callbacks(execute=True):
        good = append(api, run, schema, {"code": "ABCDEF", "count": 2})
    assert good.status_code == 201, good.json()


def test_a_reviewers_edit_never_follows_a_stored_remote_reference(
    api, run, reviewer, schema_server, django_capture_on_commit_callbacks
):
    """A step stored before references were checked keeps its schema; the reviewer's edit is
    checked against it (runs.executor.gates) and must not fetch either."""
    base, hits = schema_server
    with django_capture_on_commit_callbacks(execute=True):
        created = append(
            api, run, {"type": "object"}, {"reservation_id": "ABC123"}, "cancel_reservation"
        )
    step_id = created.json()["id"]
    # The high-risk step waits for a reviewer; store an outside reference in its schema.
    Step.objects.filter(pk=step_id).update(args_schema={"$ref": f"{base}/s.json"})
    approval = ApprovalRequest.objects.get(step_id=step_id)
    reviewer_api = token_client(reviewer)
    with assert_unchanged():
        response = reviewer_api.post(
            approval_url(approval.pk, "approve"), {"args": {"code": "x"}}, format="json"
        )
    assert response.status_code == 400
    assert hits == []


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
        {"$defs": {"a": {"allOf": [{"not": {"$ref": "#/$defs/a"}}]}}, "$ref": "#/$defs/a"},
        {"anyOf": [{"type": "string"}, {"$ref": "#"}]},
    ],
    ids=["self", "defs-cycle", "through-applicators", "any-of-self"],
)
def test_a_reference_loop_is_a_400_not_a_crash(api, run, schema):
    with assert_unchanged():
        response = append(api, run, schema, {"a": 1})
    assert response.status_code == 400, response.content
    assert "loop" in response.json()["detail"]


def test_a_recursive_schema_that_descends_into_the_value_is_fine():
    tree = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "children": {"items": {"$ref": "#"}}},
        "required": ["name"],
    }
    assert schema_invalid(tree) is None
    assert schema_problem(tree, {"name": "a", "children": [{"name": "b", "children": []}]}) is None
    assert schema_problem(tree, {"name": "a", "children": [{"children": []}]}) == (
        "children/0: 'name' is a required property"
    )
    # Deeper than Python's stack: a problem of the value, never an exception.
    deep: dict[str, Any] = {"name": "leaf"}
    for _ in range(5000):
        deep = {"name": "n", "children": [deep]}
    assert "nests too deeply" in (schema_problem(tree, deep) or "")


def test_a_schema_nested_too_deep_is_refused():
    """The API's parser already refuses bodies this deep; an MCP upstream's tool list or a
    stored schema reach the check without it."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(MAX_SCHEMA_DEPTH // 2):
        schema = {"type": "object", "properties": {"a": schema}}
    assert (
        schema_invalid(schema)
        == f"a schema nests at most {MAX_SCHEMA_DEPTH} objects and arrays deep"
    )
    assert schema_problem(schema, {"a": {}}) == f"(schema): {schema_invalid(schema)}"


EVIL = "^(a+)+$"


def test_patterns_are_matched_in_linear_time():
    """``^(a+)+$`` backtracks exponentially on Python's ``re``: 40 characters would take hours.
    A separate process, so a regression fails the test instead of hanging the suite."""
    schema = {
        "type": "object",
        "properties": {"s": {"pattern": EVIL}},
        "patternProperties": {EVIL: {"type": "integer"}},
        "additionalProperties": False,
    }
    code = (
        "import json, os, sys; import django;"
        "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'agentops.settings'); django.setup();"
        "from runs.tools import schema_problem;"
        "schema = json.loads(sys.argv[1]); bad = 'a' * 40 + '!';"
        "print(schema_problem(schema, {'s': bad}));"
        "print(schema_problem(schema, {bad: 1}));"
        "print(schema_problem(schema, {'s': 'aaaa', 'aaa': 1}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(schema)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    first, second, third = done.stdout.splitlines()
    assert first == f"s: {'a' * 40 + '!'!r} does not match {EVIL!r}"
    assert second == f"(root): {'a' * 40 + '!'!r} does not match any of the regexes: {EVIL!r}"
    assert third == "None"


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "string", "pattern": "(a)\\1"}, "not supported"),
        ({"patternProperties": {"(?=a)": {}}}, "not supported"),
        (
            {"patternProperties": {"^a": {}}, "unevaluatedProperties": False},
            "unevaluatedProperties may not be combined with patternProperties",
        ),
    ],
    ids=["backreference", "lookahead", "unevaluated-with-patterns"],
)
def test_patterns_outside_the_linear_subset_are_refused(api, run, schema, reason):
    with assert_unchanged():
        response = append(api, run, schema, {"a": "a"})
    assert response.status_code == 400
    assert reason in response.json()["detail"]
