"""When the gateway commits a call's answer, against a real uvicorn server: a read-only call is
answered before its record is written, and the session's next call waits for that record; any
other call is answered only once its record is committed. A row lock held by this test on the
call's step (from a connection of its own) keeps the record from being written meanwhile."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from django.db import connection

from approvals.models import RiskRule
from audit.models import AuditEvent
from runs.models import Step
from tests.gateway.conftest import gateway_client
from testsupport.factories import make_token

pytestmark = [pytest.mark.django_db(transaction=True)]

# The upstream's ``slow`` tool answers after this many seconds.
SLOW_SECONDS = 1.0


def _step_of(tool: str, timeout: float = 30) -> Step:
    """The step of the first call of ``tool``, once the gateway committed it ready for the
    upstream call."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = Step.objects.filter(tool=tool).first()
        if found is not None and found.status == "ready":
            return found
        time.sleep(0.02)
    raise AssertionError(f"no step of {tool} was committed")


def _status(step_id: int) -> str:
    return Step.objects.values_list("status", flat=True).get(pk=step_id)


@contextmanager
def _row_locked(step_id: int) -> Iterator[None]:
    """The step's row locked (``FOR UPDATE``) by another connection until the block ends."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params) as other:
        other.execute("SELECT 1 FROM runs_step WHERE id = %s FOR UPDATE", [step_id])
        yield
        other.rollback()


def _answer_of(result: Any) -> dict[str, Any]:
    return dict(result.model_dump(mode="json", by_alias=True, exclude_none=True))


def test_a_read_only_call_is_answered_before_its_record_which_comes_before_the_next_call(
    asgi_server, bank, operator
):
    token = make_token(operator)
    url = f"{asgi_server.url}/mcp/{bank.name}/"

    async def scenario() -> tuple[Step, dict[str, Any], bool, str]:
        async with gateway_client(url, token) as client:
            # The client validates a result against the tool's listed schema: listed first, so
            # that the answer needs no other request (which would queue behind the record).
            await client.list_tools()
            call = asyncio.ensure_future(client.call_tool("slow", {"seconds": SLOW_SECONDS}))
            step = await asyncio.to_thread(_step_of, "slow")
            with _row_locked(step.pk):
                # The upstream answers; its record waits for the lock: the answer does not.
                answered = await asyncio.wait_for(call, 30)
                unrecorded = await asyncio.to_thread(_status, step.pk)
                following = asyncio.ensure_future(client.call_tool("lookup", {"account": "A"}))
                await asyncio.sleep(SLOW_SECONDS)
                overtook = following.done()
            await asyncio.wait_for(following, 30)
        return step, _answer_of(answered), overtook, unrecorded

    step, answer, overtook, unrecorded = asyncio.run(scenario())
    assert answer["content"] == [
        {"type": "text", "text": json.dumps({"tool": "slow", "args": {"seconds": SLOW_SECONDS}})}
    ]
    assert unrecorded == "ready"
    assert not overtook
    step.refresh_from_db()
    assert (step.status, step.result) == ("succeeded", answer)
    # In the audit chain the first call's outcome comes before anything of the second call.
    second = Step.objects.get(tool="lookup")
    # Objects of other kinds (the upstream) may have the same id: their events are not the step's.
    steps = AuditEvent.objects.filter(object_type="step")
    succeeded = steps.get(object_id=str(step.pk), verb="step.succeeded")
    first_of_second = steps.filter(object_id=str(second.pk)).order_by("id").first()
    assert first_of_second is not None
    assert succeeded.id < first_of_second.id


def test_a_call_that_is_not_read_only_is_answered_only_once_its_record_is_committed(
    asgi_server, bank, operator
):
    """``slow`` declares itself read-only, but a rule raises its risk (medium: forwarded without
    an approval): its answer counts, and waits for its record."""
    RiskRule.objects.create(pattern="slow", risk="medium", priority=1)
    token = make_token(operator)
    url = f"{asgi_server.url}/mcp/{bank.name}/"

    async def scenario() -> tuple[Step, bool, dict[str, Any], str]:
        async with gateway_client(url, token) as client:
            # The client validates a result against the tool's listed schema: listed first, so
            # that the answer needs no other request (which would queue behind the record).
            await client.list_tools()
            call = asyncio.ensure_future(client.call_tool("slow", {"seconds": SLOW_SECONDS}))
            step = await asyncio.to_thread(_step_of, "slow")
            with _row_locked(step.pk):
                await asyncio.sleep(SLOW_SECONDS * 2)
                answered_early = call.done()
            answered = await asyncio.wait_for(call, 30)
            recorded = await asyncio.to_thread(_status, step.pk)
        return step, answered_early, _answer_of(answered), recorded

    step, answered_early, answer, recorded = asyncio.run(scenario())
    assert step.risk == "medium"
    assert not answered_early
    assert recorded == "succeeded"
    step.refresh_from_db()
    assert step.result == answer
