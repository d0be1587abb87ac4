"""Compensating a run over the API and from its page: 200 then 409, and neither a viewer nor
a member of another project may (nothing changes)."""

from __future__ import annotations

import pytest

import tests.tools  # noqa: F401  (registers the test tools)
from projects.models import Project
from projects.roles import Role
from runs.models import Run, RunStatus
from tests.api.conftest import plan_body, post_run, run_url, token_client
from testsupport.factories import make_user, plan_run
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

STEPS = [{"tool": "test_reserve", "args": {"seat": "9C"}}, {"tool": "test_crash", "args": {}}]


@pytest.fixture
def failed(operator, django_capture_on_commit_callbacks) -> Run:
    run = plan_run(operator, STEPS, capture=django_capture_on_commit_callbacks)
    assert run.status == RunStatus.FAILED
    return run


def test_an_operator_compensates_a_failed_run_once(
    operator_api, failed, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = operator_api.post(run_url(failed.pk, "compensate"))
    assert response.status_code == 200
    assert response.json()["compensating"] is True
    data = operator_api.get(run_url(failed.pk)).json()
    assert data["status"] == "compensated"
    assert [(s["index"], s["tool"], s["compensates"]) for s in data["steps"]] == [
        (0, "test_reserve", None),
        (1, "test_crash", None),
        (2, "test_release", 0),
    ]
    with assert_unchanged():
        again = operator_api.post(run_url(failed.pk, "compensate"))
    assert again.status_code == 409
    assert "compensated" in again.json()["detail"]


def test_a_run_with_nothing_to_undo_is_a_conflict(operator_api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run = post_run(operator_api, **plan_body({"tool": "test_crash", "args": {}})).json()
    with assert_unchanged():
        response = operator_api.post(run_url(run["id"], "compensate"))
    assert response.status_code == 409
    assert "nothing to compensate" in response.json()["detail"]


def test_a_body_is_refused(operator_api, failed):
    with assert_unchanged():
        response = operator_api.post(
            run_url(failed.pk, "compensate"), {"steps": [1]}, format="json"
        )
    assert response.status_code == 400


def test_a_viewer_may_not_compensate(failed):
    viewer = make_user("vera", Role.VIEWER)
    response = token_client(viewer).post(run_url(failed.pk, "compensate"))
    assert response.status_code == 403
    # Nothing changed but the audited refusal.
    assert Run.objects.get(pk=failed.pk).status == RunStatus.FAILED
    assert failed.steps.count() == 2


def test_an_operator_of_another_project_neither_sees_nor_compensates(failed):
    other = Project.objects.create(slug="beta", name="Beta")
    stranger = make_user("sam", Role.OPERATOR, project=other)
    api = token_client(stranger, other)
    with assert_unchanged():
        response = api.post(run_url(failed.pk, "compensate"))
    assert response.status_code == 404
    assert Run.objects.get(pk=failed.pk).status == RunStatus.FAILED


def test_the_page_compensates_and_shows_each_compensation_beside_its_step(
    client, operator, failed, django_capture_on_commit_callbacks
):
    client.force_login(operator)
    page = client.get(failed.get_absolute_url()).content.decode()
    assert 'data-action="compensate"' in page
    assert "Compensate (1 step to undo)" in page
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/runs/{failed.pk}/compensate/")
    assert response.status_code == 302
    page = client.get(response.url).content.decode()
    assert "Compensating" in page
    assert 'data-undone-by="2" data-undo-status="succeeded"' in page
    assert 'data-undoes="0"' in page
    assert 'data-tl-undoes="0"' in page
    assert 'data-action="compensate"' not in page
    # Again from a stale page: an error message, nothing changed.
    with assert_unchanged():
        again = client.post(f"/runs/{failed.pk}/compensate/", follow=True)
    assert "Cannot compensate" in again.content.decode()


def test_the_page_of_another_projects_run_cannot_compensate(failed, client):
    other = Project.objects.create(slug="beta", name="Beta")
    stranger = make_user("sam", Role.OPERATOR, project=other)
    client.force_login(stranger)
    with assert_unchanged():
        response = client.post(f"/runs/{failed.pk}/compensate/")
    assert response.status_code == 404
