"""The agent's own state through its service (``runs.control.state``): JSON Merge Patch as RFC
7396 specifies it, hostile documents refused before a library walks them, forks from any
state version, and retention removing the versions with their run."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agentops.actors import Actor
from agentops.errors import InvalidInput
from runs.control.create import run_create, step_append
from runs.control.fork import run_fork
from runs.control.lifecycle import run_cancel
from runs.control.state import run_state_write
from runs.executor.client import step_report
from runs.models import Executor, RetentionPolicy, Run, StateVersion
from runs.retention import retention_purge
from runs.selectors import agent_state_get
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

# RFC 7396 Appendix A, the examples whose target is an object (a run's state is one):
# (target, patch, result); result None: the result is no object, refused.
RFC_7396_EXAMPLES: list[tuple[dict[str, Any], Any, Any]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    # A patch that is not an object replaces the whole target.
    ({"a": "b"}, ["c"], None),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", None),
]


@pytest.fixture
def actor(operator) -> Actor:
    return Actor.for_user(operator, via_api=True)


def write(actor: Actor, run: Run, base: int, operation: Any, document: Any, **options: Any) -> Any:
    return run_state_write(
        run_id=run.pk,
        actor=actor,
        base_version=base,
        operation=operation,
        document=document,
        **options,
    )


@pytest.mark.parametrize(("target", "patch", "result"), RFC_7396_EXAMPLES)
def test_merge_patch_is_rfc_7396(actor, client_run, target, patch, result):
    write(actor, client_run, 0, "put", target)
    if result is None:
        with assert_unchanged(), pytest.raises(InvalidInput, match="JSON object"):
            write(actor, client_run, 1, "merge_patch", patch)
        assert agent_state_get(run_id=client_run.pk).state == target
        return
    written = write(actor, client_run, 1, "merge_patch", patch)
    assert written.state == result
    assert StateVersion.objects.get(run=client_run, version=2).state == result
    # The patch applied to a copy: the version before is kept as it was.
    assert StateVersion.objects.get(run=client_run, version=1).state == target


def test_a_10000_deep_document_is_refused_before_any_library_walks_it(actor, client_run):
    deep: Any = 1
    for _ in range(10_000):
        deep = {"d": deep}
    for operation, document in [
        ("put", deep),
        ("merge_patch", deep),
        ("json_patch", [{"op": "add", "path": "/x", "value": deep}]),
    ]:
        with assert_unchanged(), pytest.raises(InvalidInput, match="nested deeper"):
            write(actor, client_run, 0, operation, document)


def test_an_unknown_operation_or_bad_rationale_is_refused(actor, client_run):
    with assert_unchanged():
        with pytest.raises(InvalidInput, match="operation"):
            write(actor, client_run, 0, "replace", {})
        with pytest.raises(InvalidInput, match="rationale"):
            write(actor, client_run, 0, "put", {}, rationale="a\x00b")
        with pytest.raises(InvalidInput, match="step_index"):
            write(actor, client_run, 0, "put", {}, step_index=True)


@pytest.fixture
def written_run(actor, client_run, django_capture_on_commit_callbacks) -> Run:
    """A client run whose two client steps succeeded; its agent wrote version 1 before them,
    2 for step 0, 3 for step 1."""
    write(actor, client_run, 0, "put", {"goal": "refund"})
    for index in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            step = step_append(
                actor=actor,
                run_id=client_run.pk,
                tool="get_order",
                args={"n": index},
                executor=Executor.CLIENT,
            )
        with django_capture_on_commit_callbacks(execute=True):
            step_report(actor=actor, run_id=client_run.pk, step_id=step.pk, report={"result": 1})
        write(actor, client_run, index + 1, "merge_patch", {f"s{index}": "done"}, step_index=index)
    return client_run


@pytest.mark.parametrize(
    ("from_index", "state_version", "state"),
    [
        # By default: what the agent knew before it wrote anything for that step or later.
        (0, None, {"goal": "refund"}),
        (1, None, {"goal": "refund", "s0": "done"}),
        (2, None, {"goal": "refund", "s0": "done", "s1": "done"}),
        # Or any version, named.
        (2, 1, {"goal": "refund"}),
        (0, 3, {"goal": "refund", "s0": "done", "s1": "done"}),
        (1, 0, {}),
    ],
)
def test_a_fork_starts_from_a_state_version(
    actor, written_run, django_capture_on_commit_callbacks, from_index, state_version, state
):
    with django_capture_on_commit_callbacks(execute=True):
        fork = run_fork(
            run_id=written_run.pk, actor=actor, from_index=from_index, state_version=state_version
        )
    assert agent_state_get(run_id=fork.pk) == agent_state_get(run_id=fork.pk, version=0)
    assert agent_state_get(run_id=fork.pk).state == state
    # The fork's own writes go on from its version 0; the source's are untouched.
    assert write(actor, fork, 0, "merge_patch", {"forked": True}).version == 1
    assert agent_state_get(run_id=written_run.pk).version == 3


def test_a_fork_from_a_state_version_that_does_not_exist_is_refused(actor, written_run):
    with assert_unchanged(), pytest.raises(InvalidInput, match="0 to 3"):
        run_fork(run_id=written_run.pk, actor=actor, from_index=1, state_version=4)


def test_retention_deletes_and_redacts_the_agents_state(actor, client_run, written_run):
    RetentionPolicy.objects.create(name="a week", ttl_days=7, action="redact")
    run_cancel(run_id=written_run.pk, actor=actor)
    Run.objects.filter(pk=written_run.pk).update(finished_at=timezone.now() - timedelta(days=8))
    assert retention_purge(actor=Actor.system("retention"))["redacted_runs"] == 1
    assert not StateVersion.objects.exists()

    other = run_create(actor=actor, agent="client", goal="gone")
    write(actor, other, 0, "put", {"secret": 1})
    run_cancel(run_id=other.pk, actor=actor)
    Run.objects.filter(pk=other.pk).update(finished_at=timezone.now() - timedelta(days=8))
    RetentionPolicy.objects.update(action="delete")
    assert retention_purge(actor=Actor.system("retention"))["runs"] == 2
    assert not Run.objects.exists()
    assert not StateVersion.objects.exists()
