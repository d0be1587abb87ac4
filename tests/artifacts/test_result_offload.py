"""A step result over the threshold is kept as an artifact and the step holds a reference
(``{"$artifact": id, "sha256", "size", ...}``): for a tool agentops runs, for a client's
report (a repeated report still matches) and for an operator's settlement; smaller results,
and a storage that fails, leave the result in the step."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
import pytest

from agentops.actors import Actor
from artifacts.models import Artifact
from artifacts.services import offload_large_result
from runs.models import Step, ToolCall
from runs.tools import ToolContext, register
from tests.api.conftest import run_url, token_client
from tests.artifacts.conftest import body_of, stored_files
from testsupport.factories import plan_run

pytestmark = pytest.mark.django_db

THRESHOLD = 1024


@register("test_big_result", description="Returns {'rows': [...]} of `count` rows (tests only).")
def big_result(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return {"rows": [{"n": n, "text": "row"} for n in range(args["count"])]}


@pytest.fixture(autouse=True)
def _small_threshold(settings) -> None:
    settings.AGENTOPS_ARTIFACT_RESULT_THRESHOLD_BYTES = THRESHOLD


def _json(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _check_reference(reference: dict[str, Any], value: Any, api: Any) -> Artifact:
    """The artifact ``reference`` names holds ``value``'s JSON, which the API serves."""
    artifact = Artifact.objects.get(pk=reference["$artifact"])
    data = _json(value)
    assert reference["sha256"] == hashlib.sha256(data).hexdigest() == artifact.sha256
    assert reference["size"] == len(data) == artifact.size
    assert reference["href"] == f"/api/v1/artifacts/{artifact.pk}/content/"
    assert artifact.kind == Artifact.Kind.RESULT
    assert orjson.loads(body_of(api.get(reference["href"]))) == value
    return artifact


def test_a_large_tool_result_is_kept_as_an_artifact(operator, django_capture_on_commit_callbacks):
    run = plan_run(
        operator,
        [
            {"tool": "test_big_result", "args": {"count": 200}},
            {"tool": "test_big_result", "args": {"count": 2}},
        ],
        capture=django_capture_on_commit_callbacks,
    )
    big, small = Step.objects.filter(run=run).order_by("index")
    assert small.result == big_result({"count": 2}, None)
    api = token_client(operator)
    artifact = _check_reference(big.result, big_result({"count": 200}, None), api)
    assert (artifact.step_id, artifact.run_id, artifact.name) == (
        big.pk,
        run.pk,
        "step-0-result.json",
    )
    # The ledger keeps the reference too: a redelivered step returns it, not a second file.
    assert ToolCall.objects.get(step=big).result == big.result
    assert run.checkpoints.order_by("index").first().state["last_step"]["result"] == big.result
    # The API returns the reference with its download link.
    assert api.get(run_url(run.pk, f"steps/{big.pk}")).json()["result"] == big.result


def test_a_large_client_report_is_offloaded_and_a_repeat_still_matches(
    operator, artifact_dir, django_capture_on_commit_callbacks
):
    api = token_client(operator)
    with django_capture_on_commit_callbacks(execute=True):
        run = api.post("/api/v1/runs/", {"agent": "client", "goal": "g"}, format="json").json()
        step = api.post(
            run_url(run["id"], "steps"),
            {
                "tool": "get_reservation_details",
                "args": {"reservation_id": "ABC123"},
                "executor": "client",
            },
            format="json",
        ).json()
    value = {"pages": ["x" * 100] * 50}
    url = run_url(run["id"], f"steps/{step['id']}/result")
    with django_capture_on_commit_callbacks(execute=True):
        first = api.post(url, {"result": value}, format="json")
    assert first.status_code == 200, first.json()
    reference = first.json()["result"]
    _check_reference(reference, value, api)
    with django_capture_on_commit_callbacks(execute=True):
        again = api.post(url, {"result": value}, format="json")
    assert again.status_code == 200, again.json()
    assert again.json()["result"] == reference
    assert Artifact.objects.count() == 1
    assert len(stored_files(artifact_dir)) == 1
    with django_capture_on_commit_callbacks(execute=True):
        different = api.post(url, {"result": {"pages": ["y" * 100] * 50}}, format="json")
    assert different.status_code == 409


def test_a_result_at_the_threshold_stays_in_the_step(operator, django_capture_on_commit_callbacks):
    run = plan_run(
        operator,
        [{"tool": "test_big_result", "args": {"count": 1}}],
        capture=django_capture_on_commit_callbacks,
    )
    step = Step.objects.get(run=run)
    value = {"text": "x" * (THRESHOLD - len(_json({"text": ""})))}
    assert len(_json(value)) == THRESHOLD
    actor = Actor.system()
    assert offload_large_result(run_id=run.pk, step_id=step.pk, result=value, actor=actor) is value
    assert not Artifact.objects.exists()


def test_a_failing_storage_leaves_the_result_in_the_step(
    operator, settings, django_capture_on_commit_callbacks
):
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            # A file where the storage needs a directory: every write fails.
            "OPTIONS": {"location": "/dev/null/artifacts"},
        },
    }
    run = plan_run(
        operator,
        [{"tool": "test_big_result", "args": {"count": 200}}],
        capture=django_capture_on_commit_callbacks,
    )
    step = Step.objects.get(run=run)
    assert step.status == "succeeded"
    assert step.result == big_result({"count": 200}, None)
    assert not Artifact.objects.exists()
