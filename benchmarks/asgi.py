"""The ASGI application the benchmarks' daphne processes serve: the project's
(``web.asgi.application``) with ``benchmarks.tasks`` loaded, so that the Celery tasks a request
sends (a created run's first ``advance_run``) go to the benchmark's own queue, which its
workers consume, and not to Celery's default queue."""

from web.asgi import application  # first: sets Django up

# isort: split
import benchmarks.tasks  # noqa: F401 (routes this process's tasks to the benchmark queue)

__all__ = ["application"]
