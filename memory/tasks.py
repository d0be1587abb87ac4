"""Celery tasks of the memory store (thin: they call ``memory.retention``)."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.utils import timezone

from agentops.actors import Actor
from memory.retention import memory_purge


@shared_task(name="memory.purge")
def purge() -> dict[str, Any]:
    """Beat (``AGENTOPS_MEMORY_PURGE_INTERVAL_SECONDS``): delete expired memory items and
    apply the memory retention policies; returns the counts."""
    return memory_purge(now=timezone.now(), actor=Actor.system("memory retention")).__dict__
