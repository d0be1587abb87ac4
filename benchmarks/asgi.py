"""The ASGI application the benchmarks' daphne processes serve: the project's
(``web.asgi.application``) with ``benchmarks.tasks`` loaded, so that the Celery tasks a request
sends (a created run's first ``advance_run``) go to the benchmark's own queue, which its
workers consume, and not to Celery's default queue."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentops.settings")
django.setup()

# isort: split
# Imported before ``web.asgi``: its warm-up builds Celery's producer pool for the default
# queue set at that moment, which this module sets to the benchmark's.
import benchmarks.tasks  # noqa: E402, F401 (routes this process's tasks to the benchmark queue)
from web.asgi import application  # noqa: E402

__all__ = ["application"]
