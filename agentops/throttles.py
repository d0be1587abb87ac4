"""DRF's request throttles, counting anonymous clients by their address as
``agentops.addresses`` reads it: DRF's own ``get_ident`` believes any client's
``X-Forwarded-For`` (unless ``NUM_PROXIES`` is set), so a client could name a new address with
each request and never be throttled.

Its own module because DRF imports throttle classes while ``rest_framework.views`` loads,
before the project's API modules can be imported."""

from __future__ import annotations

from typing import Any

from rest_framework import throttling

from agentops.addresses import request_address


class _ByClientAddress:
    def get_ident(self, request: Any) -> str:
        return request_address(request)


class AnonRateThrottle(_ByClientAddress, throttling.AnonRateThrottle):
    """DRF's ``AnonRateThrottle`` (``DEFAULT_THROTTLE_RATES["anon"]``) by client address."""


class UserRateThrottle(_ByClientAddress, throttling.UserRateThrottle):
    """DRF's ``UserRateThrottle`` (``DEFAULT_THROTTLE_RATES["user"]``): by user, and an
    anonymous request by client address."""
