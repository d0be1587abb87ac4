"""Forking from the run page: reuse earlier results, optionally edit the next arguments."""

import pytest
from django.test import Client

from runs.models import Run, RunStatus
from testsupport.factories import make_run
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

STEPS = [{"tool": "echo", "args": {"value": 1}}, {"tool": "calculate", "args": {"expression": "2"}}]


@pytest.fixture
def finished(operator, django_capture_on_commit_callbacks):
    return make_run(operator, goal="g", steps=STEPS, capture=django_capture_on_commit_callbacks)


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_run_page_has_one_fork_form_reaching_each_step_that_may_start_a_fork(
    operator, finished
):
    page = client_for(operator).get(f"/runs/{finished.pk}/").content.decode()
    assert page.count('data-action="fork"') == 1
    assert 'name="from_index" id="fork-from" min="0" max="1"' in page
    assert 'data-fork-from="0"' in page
    assert 'data-fork-from="1"' in page


@pytest.mark.parametrize("args", ['{"expression": "2"}', ""])
def test_forking_with_unchanged_or_no_arguments_reuses_results(
    operator, finished, django_capture_on_commit_callbacks, args
):
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(operator).post(
            f"/runs/{finished.pk}/fork/", {"from_index": 1, "args": args}
        )
    fork = Run.objects.exclude(pk=finished.pk).get()
    assert response.status_code == 302
    assert response["Location"] == f"/runs/{fork.pk}/"
    assert fork.status == RunStatus.SUCCEEDED
    assert [s.attempts for s in fork.steps.order_by("index")] == [0, 1]
    assert fork.steps.get(index=1).args == {"expression": "2"}


def test_forking_with_edited_arguments_waits_for_approval(
    operator, finished, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        client_for(operator).post(
            f"/runs/{finished.pk}/fork/", {"from_index": 1, "args": '{"expression": "3*3"}'}
        )
    fork = Run.objects.exclude(pk=finished.pk).get()
    assert fork.status == RunStatus.WAITING


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"from_index": "x"}, "not a number"),
        ({"from_index": 1, "args": "{oops"}, "not valid JSON"),
        ({"from_index": 1, "args": '{"expression": 3}'}, "args"),
        ({"from_index": 9}, "between 0 and 2"),
    ],
)
def test_bad_fork_input_is_a_clear_message(operator, finished, data, message):
    response = client_for(operator).post(f"/runs/{finished.pk}/fork/", data, follow=True)
    assert message in response.content.decode()
    assert Run.objects.count() == 1


def test_reviewers_cannot_fork(reviewer, finished):
    client = client_for(reviewer)  # logging in is an audit event of its own
    with assert_unchanged():
        response = client.post(f"/runs/{finished.pk}/fork/", {"from_index": 0})
    assert response.status_code == 403
