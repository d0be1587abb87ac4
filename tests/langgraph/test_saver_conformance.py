"""``AgentOpsSaver`` passes LangGraph's own checkpointer conformance suite
(``langgraph-checkpoint-conformance``, PyPI) against a live agentops (daphne): every base
capability and every extended one it implements; the report is printed (``pytest -s``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from agentops_client import Client
from agentops_client.langgraph import AgentOpsSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from testsupport.factories import make_token, make_user

pytestmark = pytest.mark.django_db(transaction=True)

IMPLEMENTED = {"put", "put_writes", "get_tuple", "list", "delete_thread", "copy_thread", "prune"}


def test_the_saver_passes_every_capability_it_implements(asgi_server, seeded):
    token = make_token(make_user("graph-agent", "operator"))
    with Client(asgi_server.url, token, websocket=False) as client:

        @checkpointer_test(name="AgentOpsSaver")
        async def saver() -> AsyncIterator[AgentOpsSaver]:
            yield AgentOpsSaver(client)

        report = asyncio.run(validate(saver, progress=ProgressCallbacks.verbose()))
    report.print_report()
    detected = {name for name, result in report.results.items() if result.detected}
    assert detected == IMPLEMENTED
    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert failures == {}
    assert report.passed_all()
    assert report.conformance_level() == "FULL"
