"""The bad-token limit (``agentops.bad_tokens``, issue 29 item 6) counts failures per client
address and token prefix: a guesser from an address is refused, and nobody else is, not even
behind the same address; the client address believes ``X-Forwarded-For`` only from the
trusted proxies. The REST API, the MCP gateway's admission and WebSockets share it."""

from __future__ import annotations

import secrets
from ipaddress import ip_network

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import Client
from rest_framework.throttling import SimpleRateThrottle

from agentops.ws_auth import user_for_token
from audit.models import AuditEvent
from gateway.admission import Admitted, admit
from gateway.services import upstream_register
from testsupport.factories import PASSWORD, make_token, token_api
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

RUNS = "/api/v1/runs/"
BODY = {"agent": "client", "goal": "after the guesser"}
PROXY = "10.0.0.5"


def _bad() -> str:
    """A token of the right shape that is nobody's, with a prefix of its own."""
    return secrets.token_hex(32)


def _get(token: str, address: str, forwarded: str = "") -> int:
    extra = {"REMOTE_ADDR": address}
    if forwarded:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    return token_api(token).get(RUNS, **extra).status_code


def test_a_valid_token_is_served_after_22_bad_ones_from_its_address(operator):
    guess, other_guesses = _bad(), [_bad() for _ in range(22)]
    assert {_get(guess, "198.51.100.1") for _ in range(22)} == {401, 429}
    assert {_get(token, "198.51.100.1") for token in other_guesses} == {401}
    valid = token_api(make_token(operator))
    created = valid.post(RUNS, BODY, format="json", REMOTE_ADDR="198.51.100.1")
    assert created.status_code == 201, created.content
    # The guesser is still refused, unchecked, and nothing changes.
    with assert_unchanged():
        refused = token_api(guess).post(RUNS, BODY, format="json", REMOTE_ADDR="198.51.100.1")
    assert refused.status_code == 429
    assert refused["Retry-After"] == "60"


def test_guesses_at_a_known_prefix_are_limited_from_their_address_only(operator, settings):
    settings.AGENTOPS_BAD_TOKENS_PER_MINUTE = 3
    token = make_token(operator)
    # Knox finds a token by its first 15 characters: guesses at the rest count together.
    guesses = [token[:15] + secrets.token_hex(32)[15:] for _ in range(3)]
    assert [_get(guess, "198.51.100.2") for guess in guesses] == [401, 401, 401]
    assert _get(token[:15] + "0" * 49, "198.51.100.2") == 429
    assert _get(token, "198.51.100.3") == 200


def test_a_spoofed_x_forwarded_for_is_ignored(operator, settings, monkeypatch):
    settings.AGENTOPS_BAD_TOKENS_PER_MINUTE = 3
    guess = _bad()
    # Without trusted proxies the header names nobody: every guess is the peer's.
    codes = [_get(guess, "198.51.100.4", forwarded=f"192.0.2.{n}") for n in range(4)]
    assert codes == [401, 401, 401, 429]
    # Nor does it escape the anonymous throttle, which DRF counts by the header by default.
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "anon", "2/min")
    schema = Client(REMOTE_ADDR="198.51.100.5")
    answers = [
        schema.get("/api/schema/", {"format": "json"}, HTTP_X_FORWARDED_FOR=f"192.0.2.{n}")
        for n in range(3)
    ]
    assert [a.status_code for a in answers] == [200, 200, 429]


def test_behind_a_trusted_proxy_each_client_is_counted_apart(operator, settings):
    settings.AGENTOPS_TRUSTED_PROXIES = (ip_network("10.0.0.0/8"),)
    settings.AGENTOPS_BAD_TOKENS_PER_MINUTE = 3
    guess = _bad()
    # The guesser puts an address of its own in front of the one the proxy appends.
    codes = [_get(guess, PROXY, forwarded=f"192.0.2.{n}, 203.0.113.9") for n in range(4)]
    assert codes == [401, 401, 401, 429]
    assert _get(make_token(operator), PROXY, forwarded="203.0.113.10") == 200
    assert _get(guess, PROXY, forwarded="203.0.113.9") == 429
    # Two proxies of the site in a row: the client is the first address that is not theirs.
    assert _get(guess, PROXY, forwarded="203.0.113.9, 10.1.1.1") == 429


def test_sign_ins_behind_a_trusted_proxy_are_locked_out_and_recorded_per_client(operator, settings):
    settings.AGENTOPS_TRUSTED_PROXIES = (ip_network("10.0.0.0/8"),)
    guesser = Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="203.0.113.20")
    for _ in range(5):
        guesser.post("/accounts/login/", {"username": operator.username, "password": "wrong"})
    locked = guesser.post("/accounts/login/", {"username": operator.username, "password": PASSWORD})
    assert locked.status_code == 429
    owner = Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="203.0.113.21")
    signed_in = owner.post(
        "/accounts/login/", {"username": operator.username, "password": PASSWORD}
    )
    assert signed_in.status_code == 302
    event = AuditEvent.objects.filter(verb="user.logged_in").latest("pk")
    assert event.payload["ip"] == "203.0.113.21"


def test_the_mcp_gateway_limits_bad_tokens_and_admits_a_valid_one(
    operator, settings, django_assert_num_queries
):
    settings.AGENTOPS_BAD_TOKENS_PER_MINUTE = 3
    upstream_register(name="limited", command="true")
    guess = _bad()
    refusals = [admit("limited", f"Bearer {guess}", "198.51.100.6") for _ in range(3)]
    assert [r[0] for r in refusals] == [401, 401, 401]
    with django_assert_num_queries(1):  # the upstream: the token is not looked at
        status, _, headers = admit("limited", f"Bearer {guess}", "198.51.100.6")
    assert (status, headers) == (429, [(b"retry-after", b"60")])
    valid = admit("limited", f"Bearer {make_token(operator)}", "198.51.100.6")
    assert isinstance(valid, Admitted)


def test_websocket_tokens_share_the_limit(operator, settings, django_assert_num_queries):
    settings.AGENTOPS_BAD_TOKENS_PER_MINUTE = 3
    guess = _bad()
    for _ in range(3):
        assert user_for_token(guess, "198.51.100.7") == (AnonymousUser(), None)
    with django_assert_num_queries(0):
        assert user_for_token(guess, "198.51.100.7") == (AnonymousUser(), None)
    user, token = user_for_token(make_token(operator), "198.51.100.7")
    assert user.pk == operator.pk
    assert token is not None
