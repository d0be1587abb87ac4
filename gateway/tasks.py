"""Celery tasks of the gateway: thin wrappers that call one service."""

from celery import shared_task
from django.conf import settings

from agentops.actors import Actor
from gateway import calls


@shared_task(name="gateway.end_idle_sessions")
def end_idle_sessions() -> dict[str, int]:
    """Periodic: end the runs of MCP sessions idle for ``AGENTOPS_MCP_SESSION_IDLE_SECONDS``
    (``gateway.calls.sessions_end_idle``)."""
    return calls.sessions_end_idle(
        idle_seconds=settings.AGENTOPS_MCP_SESSION_IDLE_SECONDS, actor=Actor.system("gateway")
    )
