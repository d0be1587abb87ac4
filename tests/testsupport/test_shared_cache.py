"""The test's process and its child processes share one cache, as a deployment does: a risk
rule a test creates reaches daphne even when daphne already holds the rules of an earlier
version (``approvals.risk.load_rules``), and every test starts with that cache empty."""

from __future__ import annotations

import pytest
from agentops_client import Client
from django.core.cache import cache

from approvals.models import RiskRule
from testsupport.factories import make_token, make_user

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_rule_created_by_the_test_reaches_a_server_that_held_the_rules(asgi_server, seeded):
    client = Client(asgi_server.url, make_token(make_user("agent", "operator")), websocket=False)
    try:
        first = client.create_run("a lookup")
        # daphne classifies this step, so it holds the rules of the cache's version now.
        assert client.append_step(first.id, "get_order", {"id": 1}).status == "ready"
        RiskRule.objects.create(pattern="get_order", risk="high", priority=1)
        second = client.create_run("the same lookup")
        assert client.append_step(second.id, "get_order", {"id": 1}).status == ("awaiting_approval")
    finally:
        client.close()


@pytest.mark.parametrize("turn", ["first", "second"])
def test_each_test_starts_with_an_empty_cache(turn):
    assert cache.get("tests.shared-cache.marker") is None
    cache.set("tests.shared-cache.marker", turn, timeout=None)
