"""Fixtures of the approval-policy tests: a local HTTP server that records webhook posts, groups
of approvers, and client runs whose steps reach the real step-creation path."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth.models import Group

from agentops.actors import Actor
from approvals.models import RiskRule
from runs.control.create import step_append
from runs.models import Run, Step
from testsupport.factories import make_run


class WebhookRecorder:
    """A ThreadingHTTPServer on 127.0.0.1 that records every POST (path, JSON body) and
    answers with the codes in ``replies``, in order (200 once they run out)."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, Any]]] = []
        self.replies: list[int] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                recorder.posts.append((self.path, json.loads(body or b"{}")))
                code = recorder.replies.pop(0) if recorder.replies else 200
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        """The apprise URL of ``path`` on this server (``json://``: a JSON POST)."""
        return f"json://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def titles(self, path: str) -> list[str]:
        """The titles of the notifications posted to ``path``, in order."""
        return [body.get("title", "") for got, body in self.posts if got == f"/{path}"]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook_server() -> Iterator[WebhookRecorder]:
    recorder = WebhookRecorder()
    yield recorder
    recorder.close()


def group_of(name: str, *users: Any) -> Group:
    """The Django group ``name`` (created when missing) with ``users`` added."""
    group, _ = Group.objects.get_or_create(name=name)
    group.user_set.add(*users)
    return group


def client_step(user: Any, capture: Any, tool: str, args: dict[str, Any]) -> tuple[Run, Step]:
    """A client run requested by ``user`` with one client step of ``tool`` with ``args``,
    appended through ``step_append`` (which classifies it), on-commit work executed."""
    actor = Actor.for_user(user)
    run = make_run(user, agent="client", goal=f"call {tool}", capture=capture)
    with capture(execute=True):
        step = step_append(actor=actor, run_id=run.pk, tool=tool, args=args, executor="client")
    return Run.objects.get(pk=run.pk), Step.objects.get(pk=step.pk)


def transfer_rules() -> None:
    """Issue 29's rules: a ``transfer_funds`` call needs one approval (high risk), one of an
    ``amount`` over 1000 two (critical)."""
    RiskRule.objects.create(
        pattern="transfer_funds",
        condition="amount > 1000",
        risk="critical",
        required_approvals=2,
        priority=1,
        description="large transfer",
    )
    RiskRule.objects.create(
        pattern="transfer_funds", risk="high", priority=2, description="transfer"
    )
