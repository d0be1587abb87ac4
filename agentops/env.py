"""Typed readers for settings taken from environment variables.

Each reader fails loudly with ``ImproperlyConfigured`` on a value it cannot parse, so a typo in
a deployment is an error at start-up, never a silent default (habit taken from healthchecks'
``hc/settings.py``).
"""

import os
from ipaddress import IPv4Network, IPv6Network, ip_network

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    """Return the variable ``name`` or ``default`` when it is unset."""
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    """Return the variable ``name`` read as a boolean (1/0, true/false, yes/no, on/off).

    Raises:
        ImproperlyConfigured: the value is none of those words.
    """
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false)")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    """Return the variable ``name`` read as an integer, at least ``minimum`` when given.

    Raises:
        ImproperlyConfigured: the value is not an integer or is below ``minimum``.
    """
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    """Return the variable ``name`` split on commas, blanks dropped."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_networks(name: str) -> tuple[IPv4Network | IPv6Network, ...]:
    """Return the variable ``name`` read as comma-separated IP addresses or networks (CIDR:
    ``10.0.0.0/8``, ``fd00::/8``; an address is a network of one), none when it is unset.

    Raises:
        ImproperlyConfigured: an item is neither an address nor a network (a network with host
            bits set, ``10.0.0.1/8``, is refused as ambiguous).
    """
    networks = []
    for item in env_list(name, []):
        try:
            networks.append(ip_network(item))
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {item!r} is no IP address or network") from None
    return tuple(networks)
