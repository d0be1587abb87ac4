"""agentops: durable state store, executor and control room for AI-agent runs."""

from agentops.celery import app as celery_app

__all__ = ["celery_app"]
