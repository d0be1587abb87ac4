"""Shared fixtures: users with roles, a real Celery worker and a real ASGI server.

Tests run against the real PostgreSQL and Redis (``DATABASE_URL``, ``REDIS_URL``; the README's
test command sets both). Tests without a real worker run Celery tasks eagerly: they check the
services' logic (state machines, rules, rows), and their on-commit work runs through
``django_capture_on_commit_callbacks(execute=True)``. What depends on time, processes and the
broker (backoff countdowns, leases after a SIGKILL, commit boundaries, crashes) is tested with
real workers: ``tests/runs/test_real_timing.py``, ``tests/faults``, and the ``worker`` tests.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import transaction
from django.db.backends.postgresql.operations import DatabaseOperations as PostgresOperations

from agentops import celery_app
from approvals.models import RiskRule
from approvals.risk import default_rules
from projects.roles import Role
from testsupport.database import django_database_url
from testsupport.factories import make_user
from testsupport.processes import (
    Process,
    celery_worker_command,
    free_port,
    uvicorn_command,
    wait_until,
)

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT.parent / "shared" / "data" / "tau-bench-airline"


def pytest_configure(config: pytest.Config) -> None:
    engine = settings.DATABASES["default"]["ENGINE"]
    if "postgresql" not in engine:
        raise pytest.UsageError(
            "tests need PostgreSQL: set DATABASE_URL (the README's test command does)"
        )
    if not settings.REDIS_URL:
        raise pytest.UsageError("tests need Redis: set REDIS_URL (the README's test command does)")


@pytest.fixture(scope="session", autouse=True)
def _flush_by_delete() -> Iterator[None]:
    """Empty the tables after each transactional test with ``DELETE`` instead of Django's
    ``TRUNCATE``, in one transaction with triggers and foreign-key checks off.

    ``TRUNCATE`` gives every table and index a new file: about a third of a second for this
    schema on a quiet host, paid after each of the suite's transactional tests, where
    deleting the few rows a test made takes a few milliseconds. ``session_replication_role =
    replica`` (the test database's role is a superuser) turns off the triggers, the audit
    tables' refusal of deletes among them, and the foreign-key checks for this transaction
    only, so the tables may go in any order; the tests still see every change of audit rows
    refused. Sequences are never reset (no test asks ``reset_sequences``).
    """

    def sql_flush(
        self: PostgresOperations,
        style: object,
        tables: list[str],
        *,
        reset_sequences: bool = False,
        allow_cascade: bool = False,
    ) -> list[str]:
        if reset_sequences:
            raise NotImplementedError("the tests' flush does not reset sequences")
        if not tables:
            return []
        # The names are Django's own tables (introspection), quoted.
        deletes = [f"DELETE FROM {self.quote_name(table)}" for table in tables]  # noqa: S608
        return ["SET LOCAL session_replication_role = replica", *deletes]

    def execute_sql_flush(self: PostgresOperations, sql_list: list[str]) -> None:
        with transaction.atomic(using=self.connection.alias), self.connection.cursor() as cursor:
            for statement in sql_list:
                cursor.execute(statement)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PostgresOperations, "sql_flush", sql_flush)
        patch.setattr(PostgresOperations, "execute_sql_flush", execute_sql_flush)
        yield


@pytest.fixture(autouse=True)
def _eager_celery() -> Iterator[None]:
    """Eager tasks for the logic tests (the ``worker`` fixture and real-worker tests turn it
    off)."""
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = True


@pytest.fixture(autouse=True)
def _fast_retries(settings) -> None:
    settings.AGENTOPS_RETRY_BASE_SECONDS = 0
    settings.AGENTOPS_RETRY_MAX_SECONDS = 0


# The cache key prefix of this pytest process and of every child process it starts (the web
# server, Celery workers), as one deployment shares one cache: what a test announces in it (a
# risk rule changed, a token revoked) reaches the children, and whichever child keeps a value
# (the session's shared worker or a test's own), the others find it.
CHILD_CACHE_PREFIX = f"test-children-{uuid.uuid4().hex}"


@pytest.fixture(autouse=True)
def _shared_cache(settings) -> None:
    """The test's process on its children's cache (``CHILD_CACHE_PREFIX``), emptied first:
    versions of rules and credentials, request and failed-token counts (throttles) start from
    nothing, as the database does. Only this prefix's keys go (the broker's share the Redis
    database)."""
    settings.CACHES = {
        name: {**config, "KEY_PREFIX": CHILD_CACHE_PREFIX}
        for name, config in settings.CACHES.items()
    }
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        keys = list(client.scan_iter(match=f"{CHILD_CACHE_PREFIX}:*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture(autouse=True)
def _own_channel_layer(settings) -> None:
    """A channel layer instance of the test's own: Channels drops the layers it built when the
    ``CHANNEL_LAYERS`` setting changes (``channels.layers.ChannelLayerManager``), so a receive
    an earlier test left pending on the process's layer in a loop that stopped (channels-redis
    keeps one receive lock per layer instance, bound to its loop) cannot break this test's
    consumers."""
    settings.CHANNEL_LAYERS = {**settings.CHANNEL_LAYERS}


@pytest.fixture
def seeded(db: None) -> None:
    """Default risk rules, re-created after transactional tests flushed them."""
    for rule in default_rules():
        RiskRule.objects.get_or_create(pattern=rule["pattern"], defaults=rule)


@pytest.fixture
def operator(seeded: None):
    return make_user("olivia", Role.OPERATOR)


@pytest.fixture
def reviewer(seeded: None):
    return make_user("rita", Role.REVIEWER)


@pytest.fixture
def second_reviewer(seeded: None):
    return make_user("ravi", Role.REVIEWER)


def _child_env() -> dict[str, str]:
    """Environment for a child process that must use the test database."""
    env = dict(os.environ)
    env["AGENTOPS_CACHE_PREFIX"] = CHILD_CACHE_PREFIX
    env["DATABASE_URL"] = django_database_url()
    env["CELERY_TASK_ALWAYS_EAGER"] = "0"
    env["AGENTOPS_RETRY_BASE_SECONDS"] = "0"
    env["AGENTOPS_RETRY_MAX_SECONDS"] = "0"
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Worker(Process):
    """A real ``celery -A agentops worker`` process on the test database, loading the module
    ``include`` (test tools), with ``env`` added to its environment (settings); ``purge``
    drops the messages earlier tests left in the queue."""

    def __init__(
        self,
        log: Path,
        concurrency: int = 2,
        include: str = "",
        purge: bool = True,
        **env: str,
    ):
        cmd = celery_worker_command(
            hostname=f"test-{os.getpid()}-{log.parent.name}@%h",
            concurrency=concurrency,
            include=include,
            purge=purge,
        )
        super().__init__(cmd, {**_child_env(), **env}, log, name="celery worker")
        self.wait_for_log("ready.", "celery worker")


@pytest.fixture(scope="session")
def _worker_process(django_db_setup, tmp_path_factory) -> Iterator[Worker]:
    worker = Worker(tmp_path_factory.mktemp("worker") / "worker.log")
    yield worker
    worker.stop()


@pytest.fixture
def worker(_worker_process: Worker, transactional_db: None, seeded: None) -> Iterator[Worker]:
    """A running Celery worker; tasks go to it through Redis instead of running eagerly."""
    celery_app.conf.task_always_eager = False
    yield _worker_process
    celery_app.conf.task_always_eager = True


@pytest.fixture
def only_this_tests_workers() -> Iterator[None]:
    """Workers already running (the session's ``worker``) stop consuming the step queue for
    the test, so the worker it starts, and only that one, gets its messages."""
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    celery_app.control.cancel_consumer(queue, reply=True, timeout=2)
    yield
    celery_app.control.add_consumer(queue, reply=True, timeout=2)


class AsgiServer(Process):
    """A real web server process on the test database, the one ``scripts/start`` runs
    (``uvicorn web.asgi:application``), with ``env`` added to its environment (settings)."""

    def __init__(self, log: Path, **env: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # AGENTOPS_DB_POOL: as web processes run (scripts/start).
        env = {**_child_env(), "AGENTOPS_DB_POOL": "1", **env}
        super().__init__(uvicorn_command(port=self.port), env, log, name="uvicorn")
        self.wait_until(self._accepts, "uvicorn")

    def _accepts(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True


@pytest.fixture(scope="session")
def asgi_server(django_db_setup, tmp_path_factory) -> Iterator[AsgiServer]:
    """The web app served by uvicorn (HTTP and WebSocket) on a free local port."""
    server = AsgiServer(tmp_path_factory.mktemp("uvicorn") / "uvicorn.log")
    yield server
    server.stop()


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.1):
    """Poll ``predicate`` until it returns a truthy value, which is returned; fail after
    ``timeout`` seconds."""
    return wait_until(predicate, timeout, "condition", interval)


@pytest.fixture
def held_messages(monkeypatch) -> list[tuple[str, tuple]]:
    """Hold Celery messages instead of delivering them, as a broker nobody consumes would.

    Returns the list of (task name, args) sent, so a test can deliver them when it wants.
    """
    from runs import tasks

    sent: list[tuple[str, tuple]] = []
    for task in (tasks.advance_run, tasks.execute_step, tasks.retry_step):
        monkeypatch.setattr(
            task,
            "apply_async",
            lambda args=(), kwargs=None, name=task.name, **options: sent.append((name, args)),
        )
        monkeypatch.setattr(task, "delay", lambda *args, name=task.name: sent.append((name, args)))
    return sent


@pytest.fixture
def opened():
    """``opened(**kwargs)`` is a new ``testsupport.open_transactions.OpenTransaction`` (a
    transaction held open on its own connection); what a failure leaves open is rolled back."""
    from testsupport.open_transactions import OpenTransaction

    made: list[OpenTransaction] = []

    def make(**kwargs):
        made.append(OpenTransaction(**kwargs))
        return made[-1]

    yield make
    for held in made:
        held.abort()
