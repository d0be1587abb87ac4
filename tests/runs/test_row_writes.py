"""Every field a transition or a service changes is written: the fast path writes the fields
each model declares (``UPDATED_FIELDS``), and these tests prove that list is complete.

1. Every FSM transition of ``Run`` and ``Step``, from every source status, on an instance:
   each field it changes must be declared.
2. Real flows through the services (success, retry, failure, approval, rejection, expiry,
   cancel, resume, fork, client runs, a lost worker, a deadline): after every fast-path write,
   the row read back through the ORM equals the instance that was written, field by field.
"""

from __future__ import annotations

import inspect
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from django_fsm import FSMField, can_proceed

import tests.tools  # noqa: F401  (registers the test tools)
from agentops.actors import Actor
from agentops.clock import DatabaseTime, database_now
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from runs.control.create import run_create, step_append
from runs.control.fork import run_fork
from runs.control.lifecycle import run_cancel, run_complete, run_resume
from runs.executor.claim import claim_step
from runs.executor.client import step_report
from runs.executor.entry import run_advance
from runs.models import Run, Step
from runs.recovery import sweep
from runs.statuses import RunStatus, StepStatus
from runs.store import writes

pytestmark = pytest.mark.django_db

NOW = timezone.now()
# Arguments for transition parameters, by name: a transition with a parameter not named here
# fails the first test until it is added (and its effect checked).
SAMPLE_ARGUMENTS: dict[str, Any] = {
    "error": {"type": "test", "message": "test"},
    "now": NOW,
    "owner": "host:1",
    "lease_expires_at": NOW + timedelta(seconds=90),
    "next_attempt_at": NOW + timedelta(seconds=5),
    "result": {"ok": True},
    "tool_error": True,
    "gate": "approval",
}
# Never written by ``writes.update`` through the declaration: ``updated_at`` is written as an
# ``auto_now`` field with every update.
WRITTEN_ANYWAY = {"updated_at"}


def _values(obj: Any) -> dict[str, Any]:
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}


def _transitions(model: type[Run] | type[Step]) -> list[tuple[str, str]]:
    field = next(f for f in model._meta.concrete_fields if isinstance(f, FSMField))
    found = []
    for transition in field.get_all_transitions(model):
        if transition.source not in ("*", "+"):
            found.append((transition.source, transition.name))
    return found


def _instance(model: type[Run] | type[Step], source: str, name: str) -> Run | Step:
    """An unsaved ``model`` in ``source`` that meets the conditions of its transition
    ``name`` (a run's compensation moves need a compensating run, the others one that is not)."""
    variants: list[dict[str, Any]] = [{}, {"compensating": True}] if model is Run else [{}]
    for extra in variants:
        obj = model(status=source, **extra)
        if can_proceed(getattr(obj, name)):
            return obj
    raise AssertionError(f"{model.__name__}.{name} from {source} never proceeds")


@pytest.mark.parametrize("model", [Run, Step], ids=lambda m: m.__name__)
def test_every_field_a_transition_changes_is_declared(model):
    declared = set(writes.updated_fields(model)) | WRITTEN_ANYWAY
    transitions = _transitions(model)
    assert len(transitions) >= 8
    for source, name in transitions:
        obj = _instance(model, source, name)
        method = getattr(obj, name)
        params = [p for p in inspect.signature(method).parameters if p not in ("self",)]
        unknown = [p for p in params if p not in SAMPLE_ARGUMENTS]
        assert not unknown, f"{model.__name__}.{name} takes {unknown}: add sample values"
        before = _values(obj)
        method(**{p: SAMPLE_ARGUMENTS[p] for p in params})
        changed = {field for field, value in _values(obj).items() if before[field] != value}
        missing = changed - declared
        assert not missing, f"{model.__name__}.{name} from {source} changes undeclared {missing}"


@pytest.fixture
def read_back(monkeypatch):
    """Wrap ``writes.update`` so every fast-path write is checked against the row read back
    through the ORM; returns the list of (model, fields that changed) it saw."""
    real_update = writes.update
    seen: list[tuple[str, str]] = []

    def checked_update(obj: Any, *, guard: dict[str, Any]) -> None:
        before = database_now()
        real_update(obj, guard=guard)
        stored = type(obj).objects.filter(pk=obj.pk).values(*_values(obj)).get()
        after = database_now()

        def written(stored: Any, value: Any) -> bool:
            if not isinstance(value, DatabaseTime):
                return bool(stored == value)
            # The database's clock as the UPDATE ran, plus the value's seconds.
            offset = timedelta(seconds=value.seconds)
            return stored is not None and before + offset <= stored <= after + offset

        differing = {k for k, v in _values(obj).items() if not written(stored[k], v)}
        assert not differing, f"{type(obj).__name__} {obj.pk}: {differing} not written"
        seen.append((type(obj).__name__, str(obj.status)))

    monkeypatch.setattr(writes, "update", checked_update)
    return seen


def _plan(actor: Actor, *steps: dict[str, Any], **extra: Any) -> Run:
    return run_create(actor=actor, agent="plan", goal="row writes", steps=list(steps), **extra)


EMAIL = {"tool": "send_email", "args": {"to": ["a@example.com"], "subject": "s", "body": "b"}}


def test_service_flows_write_every_field_they_change(
    read_back, operator, reviewer, django_capture_on_commit_callbacks
):
    op, rev, system = Actor.for_user(operator), Actor.for_user(reviewer), Actor.system("test")
    capture = django_capture_on_commit_callbacks
    with capture(execute=True):
        ok = _plan(op, {"tool": "calculate", "args": {"expression": "1+2"}}, EMAIL)
    with capture(execute=True):
        approval_decide(
            approval_id=ApprovalRequest.objects.get(run=ok).pk, actor=rev, decision="approve"
        )
    with capture(execute=True):
        crashed = _plan(op, {"tool": "test_crash", "args": {}})
    with capture(execute=True):
        run_resume(run_id=crashed.pk, actor=op)
    with capture(execute=True):
        rejected = _plan(op, EMAIL, {"tool": "echo", "args": {"value": 0}})
    with capture(execute=True):
        approval_decide(
            approval_id=ApprovalRequest.objects.get(run=rejected).pk, actor=rev, decision="reject"
        )
    with capture(execute=True):
        run_create(actor=op, agent="plan", goal="r", steps=[EMAIL], grant={"tools": ["echo"]})
    with capture(execute=True):
        expired = _plan(op, EMAIL)
    ApprovalRequest.objects.filter(run=expired).update(expires_at=NOW - timedelta(seconds=1))
    with capture(execute=True):
        cancelled = _plan(op, EMAIL, {"tool": "echo", "args": {"value": 1}})
    with capture(execute=True):
        run_cancel(run_id=cancelled.pk, actor=op, reason="stop")
    with capture(execute=True):
        forked = run_fork(run_id=ok.pk, actor=op, from_index=1, args={**EMAIL["args"], "body": "c"})
    with capture(execute=True):
        client = run_create(actor=op, agent="client", goal="client", steps=[])
    with capture(execute=True):
        step_append(actor=op, run_id=client.pk, tool="echo", args={"value": 2})
    with capture(execute=True):
        own = step_append(
            actor=op, run_id=client.pk, tool="get_quote", args={"q": 1}, executor="client"
        )
    retryable = {"type": "Timeout", "message": "slow", "retryable": True}
    with capture(execute=True):
        step_report(actor=op, run_id=client.pk, step_id=own.pk, report={"error": retryable})
    with capture(execute=True):
        step_report(actor=op, run_id=client.pk, step_id=own.pk, report={"result": {"ok": 1}})
    with capture(execute=True):
        run_complete(run_id=client.pk, actor=op)
    # Over its token budget, the next step waits for approval to continue; approving grants.
    with capture(execute=True):
        budgeted = run_create(
            actor=op, agent="client", goal="b", budget={"max_tokens": 10, "on_exceed": "approve"}
        )
    with capture(execute=True):
        step_append(
            actor=op, run_id=budgeted.pk, tool="echo", args={"value": 5}, usage={"input_tokens": 11}
        )
    with capture(execute=True):
        approval_decide(
            approval_id=ApprovalRequest.objects.get(run=budgeted).pk, actor=rev, decision="approve"
        )
    assert Run.objects.get(pk=budgeted.pk).budget_grants == 1
    # A worker claims a step and dies: its lease runs out and the sweeper recovers the step.
    with capture(execute=False):
        lost = _plan(op, {"tool": "echo", "args": {"value": 4}})
        run_advance(run_id=lost.pk, actor=system)
    assert claim_step(lost.steps.get().pk, Actor.worker()) is not None
    Step.objects.filter(run=lost).update(lease_expires_at=NOW - timedelta(seconds=1))
    with capture(execute=True):
        late = _plan(op, EMAIL, deadline=NOW + timedelta(days=1))
    Run.objects.filter(pk=late.pk).update(deadline=NOW - timedelta(seconds=1))
    with capture(execute=True):
        sweep(actor=Actor.system("sweeper"))

    ended = dict(Run.objects.values_list("pk", "status"))
    assert [ended[r.pk] for r in (ok, crashed, rejected, expired, cancelled, lost, late)] == [
        RunStatus.SUCCEEDED,
        RunStatus.FAILED,
        RunStatus.FAILED,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
        RunStatus.SUCCEEDED,
        RunStatus.FAILED,
    ]
    assert (ended[forked.pk], ended[client.pk]) == (RunStatus.WAITING, RunStatus.SUCCEEDED)
    # Every status a step can be written with was written (and read back) at least once.
    written = {status for model, status in read_back if model == "Step"}
    assert set(StepStatus.values) - {StepStatus.PENDING} <= written
