"""The MCP gateway under faults: an upstream killed in the middle of a call, and a client that
gives up waiting for an approval and sends the same call again. No call reaches the upstream
twice, no run is left stuck; what the upstream received is read from its own log."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import psycopg
import pytest
from django.db import connection

from agentops.actors import Actor
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from gateway.models import McpSession
from runs.models import Run, Step
from tests.gateway.conftest import gateway_client, seen, text
from testsupport.factories import make_token, make_user

pytestmark = [pytest.mark.django_db(transaction=True)]


def _wait(predicate, timeout: float = 30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_an_upstream_killed_mid_call_leaves_the_outcome_unknown_and_is_restarted(
    asgi_server, bank, upstream_log, operator
):
    token = make_token(operator)
    url = f"{asgi_server.url}/mcp/{bank.name}/"

    async def first_session() -> str:
        async with gateway_client(url, token) as client:
            call = asyncio.ensure_future(client.call_tool("slow", {"seconds": 30}))
            started = await asyncio.to_thread(
                _wait, lambda: [c for c in seen(upstream_log) if c["tool"] == "slow"]
            )
            os.kill(started[0]["pid"], signal.SIGKILL)
            result = await asyncio.wait_for(call, 30)
            assert result.is_error
            return text(result)

    message = asyncio.run(first_session())
    assert "unknown" in message
    step = Step.objects.get(tool="slow")
    assert step.status == "failed"
    assert step.error["type"] == "outcome_unknown"
    # Its run is not left running: it failed with the unknown outcome, for an operator.
    assert Run.objects.get(pk=step.run_id).status == "failed"

    async def second_session() -> str:
        async with gateway_client(url, token) as client:
            return text(await client.call_tool("lookup", {"account": "A-2"}))

    assert "A-2" in asyncio.run(second_session())
    calls = seen(upstream_log)
    assert [c["tool"] for c in calls] == ["slow", "lookup"]
    assert calls[0]["pid"] != calls[1]["pid"]  # a new upstream process


def test_a_call_repeated_while_it_waits_for_approval_is_the_same_call(
    asgi_server, bank, upstream_log, operator
):
    reviewer = make_user("rex-gw", "reviewer")
    token = make_token(operator)
    url = f"{asgi_server.url}/mcp/{bank.name}/"
    args = {"to": "D", "amount": 42}

    async def scenario() -> tuple[str, str]:
        async with gateway_client(url, token) as client:
            first = asyncio.ensure_future(client.call_tool("transfer", args))
            approval = await asyncio.to_thread(
                _wait, lambda: ApprovalRequest.objects.filter(status="pending").first()
            )
            first.cancel()  # the client gives up waiting...
            again = asyncio.ensure_future(client.call_tool("transfer", args))  # ...and repeats
            await asyncio.sleep(1)
            assert await asyncio.to_thread(ApprovalRequest.objects.count) == 1
            await asyncio.to_thread(
                approval_decide,
                approval_id=approval.pk,
                actor=Actor.for_user(reviewer),
                decision="approve",
                comment="ok",
            )
            result = await asyncio.wait_for(again, 30)
            return text(result), str(result.is_error)

    answer, is_error = asyncio.run(scenario())
    assert is_error == "False"
    assert '"amount": 42' in answer
    assert [(c["tool"], c["args"]) for c in seen(upstream_log)] == [("transfer", args)]
    (session,) = McpSession.objects.all()
    assert list(Step.objects.filter(run_id=session.run_id).values_list("tool", "status")) == [
        ("transfer", "succeeded")
    ]


def _terminate_connections(keep: int) -> int:
    """Terminate every connection to the test database but ``keep`` (a backend pid) and this
    function's own, and wait until those are gone; returns how many there were. Connections
    opened after (the server's replacement, any other process of the test run) are left
    alone: waiting for none at all would wait for whatever reconnects meanwhile."""
    params = connection.settings_dict
    with psycopg.connect(
        dbname=params["NAME"],
        user=params["USER"],
        host=params["HOST"],
        port=params["PORT"] or None,
        autocommit=True,
    ) as own:
        others = own.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid NOT IN (pg_backend_pid(), %s)",
            [keep],
        ).fetchall()
        terminate = "SELECT pg_terminate_backend(%s)"
        terminated = [
            pid for (pid,) in others if own.execute(terminate, [pid]).fetchone() == (True,)
        ]
        gone = "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = ANY(%s)"
        _wait(lambda: own.execute(gone, [terminated]).fetchone() == (True,))
    return len(terminated)


def _succeeded() -> int:
    """Steps succeeded, read on a connection closed after (this thread's would be terminated
    with the server's)."""
    try:
        return Step.objects.filter(status="succeeded").count()
    finally:
        connection.close()


def test_calls_after_postgresql_dropped_the_servers_connections_succeed(
    asgi_server, bank, upstream_log, operator
):
    """The gateway keeps its database connection between calls (``gateway.dbthread``): one
    PostgreSQL closed meanwhile is replaced, the next call is answered."""
    token = make_token(operator)
    url = f"{asgi_server.url}/mcp/{bank.name}/"
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (this_test,) = cursor.fetchone()

    async def scenario() -> list[bool]:
        errors = []
        async with gateway_client(url, token) as client:
            for done, account in enumerate(("A-1", "A-2"), start=1):
                result = await client.call_tool("lookup", {"account": account})
                errors.append(bool(result.is_error))
                # A read-only call's outcome is recorded just after its answer: dropped after.
                await asyncio.to_thread(_wait, lambda n=done: _succeeded() == n)
                terminated = await asyncio.to_thread(_terminate_connections, this_test)
                assert terminated >= 1
            result = await client.call_tool("lookup", {"account": "A-3"})
            errors.append(bool(result.is_error))
        return errors

    assert asyncio.run(scenario()) == [False, False, False]
    assert [c["args"]["account"] for c in seen(upstream_log)] == ["A-1", "A-2", "A-3"]
    statuses = list(Step.objects.order_by("index").values_list("status", flat=True))
    assert statuses == ["succeeded"] * 3
