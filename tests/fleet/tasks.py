"""A task registered only for tests (loaded by the test's worker with ``-I tests.fleet.tasks``):
it fails until a Redis key allows it, so a test can see a failure recorded, then a re-sent copy
succeed."""

import redis
from celery import shared_task
from django.conf import settings


@shared_task(name="tests.fleet.fail_until_allowed")
def fail_until_allowed(key: str, *, note: str = "") -> str:
    """Raise ``RuntimeError`` unless ``<key>:allowed`` exists in Redis; then count the call
    in ``<key>:done`` and return ``note``."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    try:
        if not client.exists(f"{key}:allowed"):
            raise RuntimeError(f"not allowed yet: {key}")
        client.incr(f"{key}:done")
    finally:
        client.close()
    return note
