"""The client's IP address, behind the reverse proxies the site trusts.

A request's peer (``REMOTE_ADDR``, an ASGI scope's ``client``) is the client itself or a
reverse proxy in front of the site. A proxy names the address it got the request from by
appending it to ``X-Forwarded-For``, but anyone can send that header: only what the proxies
of ``AGENTOPS_TRUSTED_PROXIES`` appended is believed. Reading the header from the right (the
nearest proxy's entry first), the client is the first address that is not a trusted proxy's;
from a peer that is not a trusted proxy the header is ignored. This is the "rightmost
untrusted address" rule (MDN, "X-Forwarded-For", selecting an IP address; RFC 7239 section 5.2
describes the same chain of proxies for ``Forwarded``).

Every use of a client's address reads it here: the bad-token limit (``agentops.bad_tokens``),
DRF's throttles of anonymous clients (``agentops.throttles``), django-axes' sign-in lockout
and the audit log's record of sign-ins.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, ip_address
from typing import Any

from django.conf import settings


def _parsed(text: str) -> IPv4Address | IPv6Address | None:
    """The address in ``text`` (``1.2.3.4``, ``1.2.3.4:5678``, ``::1``, ``[::1]:443``; an
    IPv4-mapped IPv6 address as its IPv4 address), or None."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        found = ip_address(text)
    except ValueError:
        return None
    if isinstance(found, IPv6Address) and found.ipv4_mapped is not None:
        return found.ipv4_mapped
    return found


def _trusted(address: IPv4Address | IPv6Address) -> bool:
    return any(address in network for network in settings.AGENTOPS_TRUSTED_PROXIES)


def client_address(peer: str, forwarded_for: str) -> str:
    """The client's address, from the ``peer`` the server saw and the ``X-Forwarded-For``
    value (its lines joined by commas; "" when absent) by the rule of the module docstring;
    ``peer`` as it is when it is no address (a Unix socket)."""
    current = _parsed(peer)
    if current is None:
        return peer
    hops = forwarded_for.split(",") if forwarded_for else []
    while hops and _trusted(current):
        hop = _parsed(hops.pop())
        if hop is None:  # a trusted proxy writes addresses: the rest is not theirs
            break
        current = hop
    return str(current)


def request_address(request: Any) -> str:
    """The client's address of a Django request (django-axes' ``AXES_CLIENT_IP_CALLABLE``)."""
    meta = request.META
    return client_address(str(meta.get("REMOTE_ADDR", "")), meta.get("HTTP_X_FORWARDED_FOR", ""))


def scope_address(scope: dict[str, Any]) -> str:
    """The client's address of an ASGI connection (HTTP or WebSocket)."""
    client = scope.get("client")
    forwarded = ",".join(
        value.decode("latin1")
        for name, value in scope.get("headers", [])
        if name.lower() == b"x-forwarded-for"
    )
    return client_address(str(client[0]) if client else "", forwarded)
