"""The client's address (``agentops.addresses``): the peer's, and behind the trusted proxies
(``AGENTOPS_TRUSTED_PROXIES``, read by ``agentops.env.env_networks``) the first address of
``X-Forwarded-For`` from the right that is not theirs."""

from __future__ import annotations

from ipaddress import ip_network

import pytest
from django.core.exceptions import ImproperlyConfigured

from agentops.addresses import client_address, scope_address
from agentops.env import env_networks

PROXIES = (ip_network("10.0.0.0/8"), ip_network("fd00::/8"))


@pytest.mark.parametrize(
    ("peer", "forwarded", "client"),
    [
        ("203.0.113.1", "", "203.0.113.1"),
        ("203.0.113.1", "198.51.100.9", "203.0.113.1"),  # not a proxy: the header is ignored
        ("10.0.0.5", "", "10.0.0.5"),  # a proxy that names nobody
        ("10.0.0.5", "198.51.100.9", "198.51.100.9"),
        ("10.0.0.5", "192.0.2.66, 198.51.100.9", "198.51.100.9"),  # spoofed in front
        ("10.0.0.5", "192.0.2.66,198.51.100.9, 10.2.2.2", "198.51.100.9"),  # two proxies
        ("10.0.0.5", "10.9.9.9, 10.2.2.2", "10.9.9.9"),  # all the site's own
        ("10.0.0.5", "198.51.100.9, not-an-address", "10.0.0.5"),
        ("10.0.0.5", "198.51.100.9:4711", "198.51.100.9"),
        ("fd00::1", "[2001:db8::7]:443", "2001:db8::7"),
        ("::ffff:10.0.0.5", "198.51.100.9", "198.51.100.9"),
        ("", "198.51.100.9", ""),  # a Unix socket's peer
    ],
)
def test_the_client_is_the_first_address_from_the_right_not_a_trusted_proxy(
    settings, peer, forwarded, client
):
    settings.AGENTOPS_TRUSTED_PROXIES = PROXIES
    assert client_address(peer, forwarded) == client


def test_without_trusted_proxies_the_header_names_nobody(settings):
    settings.AGENTOPS_TRUSTED_PROXIES = ()
    assert client_address("10.0.0.5", "198.51.100.9") == "10.0.0.5"


def test_an_asgi_connection_joins_its_header_lines(settings):
    settings.AGENTOPS_TRUSTED_PROXIES = PROXIES
    headers = [(b"x-forwarded-for", b"198.51.100.9"), (b"X-Forwarded-For", b"10.1.1.1")]
    assert scope_address({"client": ("10.0.0.5", 5000), "headers": headers}) == "198.51.100.9"
    assert scope_address({"headers": headers}) == ""


def test_trusted_proxies_are_read_as_addresses_and_networks(monkeypatch):
    monkeypatch.setenv("AGENTOPS_TRUSTED_PROXIES", " 10.0.0.0/8, 192.0.2.7 ,fd00::/8")
    assert env_networks("AGENTOPS_TRUSTED_PROXIES") == (
        ip_network("10.0.0.0/8"),
        ip_network("192.0.2.7/32"),
        ip_network("fd00::/8"),
    )
    monkeypatch.delenv("AGENTOPS_TRUSTED_PROXIES")
    assert env_networks("AGENTOPS_TRUSTED_PROXIES") == ()
    for wrong in ("10.0.0.1/8", "proxy.example.com", "10.0.0.0/33"):
        monkeypatch.setenv("AGENTOPS_TRUSTED_PROXIES", wrong)
        with pytest.raises(ImproperlyConfigured, match="AGENTOPS_TRUSTED_PROXIES"):
            env_networks("AGENTOPS_TRUSTED_PROXIES")
