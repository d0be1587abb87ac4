"""Registering upstream MCP servers and fetching their tool lists (synchronous callers:
admin, ``manage.py mcp_add``)."""

from __future__ import annotations

import asyncio
from typing import Any

from django.db import transaction
from django.utils import timezone

from agentops.errors import InvalidInput
from audit.services import audit_system
from gateway.models import Transport, Upstream
from gateway.upstream import UpstreamSpec, fetch_tools


def upstream_refresh_tools(upstream: Upstream) -> list[dict[str, Any]]:
    """Fetch ``upstream``'s tools (its ``tools/list``), keep them on it and return them.

    Raises:
        gateway.upstream.UpstreamUnavailable: it could not be started or reached.
    """
    upstream.tools = asyncio.run(fetch_tools(UpstreamSpec.of(upstream)))
    upstream.tools_fetched_at = timezone.now()
    upstream.save(update_fields=["tools", "tools_fetched_at"])
    return upstream.tools


def upstream_register(
    *, name: str, command: str = "", url: str = "", headers: dict[str, str] | None = None
) -> Upstream:
    """Create or replace the upstream ``name``: a stdio ``command`` or a streamable-HTTP
    ``url`` (with ``headers``), exactly one of them.

    Raises:
        InvalidInput: both or neither of ``command`` and ``url``, or a bad name.
    """
    if bool(command) == bool(url):
        raise InvalidInput("give either a command (stdio) or a URL (streamable HTTP)")
    fields = {
        "transport": Transport.STDIO if command else Transport.HTTP,
        "command": command,
        "url": url,
        "headers": headers or {},
        "enabled": True,
        "tools": [],
        "tools_fetched_at": None,
    }
    upstream = Upstream(name=name, **fields)
    try:
        upstream.full_clean(exclude=["tools", "tools_fetched_at"], validate_unique=False)
    except Exception as exc:
        raise InvalidInput(str(exc)) from exc
    with transaction.atomic():
        upstream, created = Upstream.objects.update_or_create(name=name, defaults=fields)
        # Which server a gateway path reaches decides what its calls do: audited. The
        # headers are left out (they may hold the upstream's credentials).
        audit_system(
            verb="gateway.upstream.added" if created else "gateway.upstream.replaced",
            object_type="upstream",
            object_id=upstream.pk,
            payload={"name": name, "transport": upstream.transport, "command": command, "url": url},
        )
    return upstream


def upstream_as_json(upstream: Upstream) -> dict[str, Any]:
    """The upstream as a project's policy records it (its headers left out: they may hold
    its credentials)."""
    return {
        "name": upstream.name,
        "transport": upstream.transport,
        "command": upstream.command,
        "url": upstream.url,
        "enabled": upstream.enabled,
        "project": upstream.project_id,
    }
