"""Forking a run from a checkpoint reuses earlier results and calls no tool for them."""

import pytest

import tests.tools  # noqa: F401  (registers the test tools)
from agentops.actors import Actor
from agentops.errors import InvalidInput
from runs.control.fork import run_fork
from runs.models import RunStatus, StepStatus
from tests.tools import CALLS
from testsupport.factories import make_run
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


def finished_run(operator, capture):
    run = make_run(
        operator,
        goal="three counts",
        steps=[
            {"tool": "test_count"},
            {"tool": "test_count", "args": {"n": 2}},
            {"tool": "calculate", "args": {"expression": "1+1"}},
        ],
        capture=capture,
    )
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    return run


def test_a_fork_reuses_results_before_the_checkpoint_and_runs_the_rest(
    operator, django_capture_on_commit_callbacks
):
    source = finished_run(operator, django_capture_on_commit_callbacks)
    calls_before = sum(CALLS.values())
    with django_capture_on_commit_callbacks(execute=True):
        fork = run_fork(run_id=source.pk, actor=Actor.for_user(operator), from_index=2)
    fork.refresh_from_db()
    assert fork.status == RunStatus.SUCCEEDED
    assert fork.metadata["forked_from"] == {"run": str(source.pk), "index": 2}
    steps = list(fork.steps.order_by("index"))
    assert [s.result for s in steps] == [s.result for s in source.steps.order_by("index")]
    assert [s.attempts for s in steps] == [0, 0, 1]
    # The two reused test_count steps were not called again.
    assert sum(CALLS.values()) == calls_before
    assert fork.checkpoints.count() == 3


def test_edited_arguments_get_a_new_key_and_need_approval(
    operator, reviewer, django_capture_on_commit_callbacks
):
    source = finished_run(operator, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        fork = run_fork(
            run_id=source.pk,
            actor=Actor.for_user(operator),
            from_index=2,
            args={"expression": "2+2"},
        )
    fork.refresh_from_db()
    assert fork.status == RunStatus.WAITING
    edited = fork.steps.get(index=2)
    assert edited.status == StepStatus.WAITING
    assert edited.args == {"expression": "2+2"}
    assert edited.idempotency_key != source.steps.get(index=2).idempotency_key


@pytest.mark.parametrize(
    ("from_index", "args", "reason"),
    [(9, None, "between 0 and 3"), (2, {"expression": 5}, "args"), (3, {"x": 1}, "no step")],
)
def test_bad_fork_requests_are_refused(
    operator, django_capture_on_commit_callbacks, from_index, args, reason
):
    source = finished_run(operator, django_capture_on_commit_callbacks)
    with assert_unchanged(), pytest.raises(InvalidInput, match=reason):
        run_fork(run_id=source.pk, actor=Actor.for_user(operator), from_index=from_index, args=args)
