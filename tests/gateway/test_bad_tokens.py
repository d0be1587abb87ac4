"""The MCP gateway has the REST API's bad-token limit (``agentops.bad_tokens``): against a real
uvicorn, a client sending bad tokens of one prefix is refused after the limit, whatever
``X-Forwarded-For`` it claims (no proxy is trusted here), and a valid token from the same
address is still admitted."""

from __future__ import annotations

import secrets

import httpx2
import pytest

from testsupport.factories import make_token

pytestmark = [pytest.mark.django_db(transaction=True)]

LIMIT = 20  # the server's AGENTOPS_BAD_TOKENS_PER_MINUTE (its default)


def test_bad_tokens_are_limited_and_a_valid_token_admitted(asgi_server, bank, operator):
    url = f"{asgi_server.url}/mcp/{bank.name}/"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    guess = secrets.token_hex(32)
    with httpx2.Client(timeout=30) as http:
        codes = [
            http.post(
                url,
                json=body,
                headers={"Authorization": f"Bearer {guess}", "X-Forwarded-For": f"192.0.2.{n}"},
            )
            for n in range(LIMIT + 2)
        ]
        valid = http.post(
            url,
            json=body,
            headers={
                "Authorization": f"Bearer {make_token(operator)}",
                "Accept": "application/json, text/event-stream",
            },
        )
    assert [c.status_code for c in codes] == [401] * LIMIT + [429, 429]
    assert codes[-1].headers["retry-after"] == "60"
    # Admitted: the MCP server answers (a request outside any session is its 400).
    assert valid.status_code == 400
