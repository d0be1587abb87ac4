"""Test data built the way the product builds it: users with their roles, and runs created and
advanced through the services (Celery eager, on-commit work run by the caller's
``django_capture_on_commit_callbacks``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentops.actors import Actor
from runs.control.create import run_create
from runs.models import Run, Step
from runs.statuses import RunStatus

PASSWORD = "correct-horse-battery-staple"
EMAIL_ARGS = {"to": ["customer@example.com"], "subject": "Your refund", "body": "Refunded."}
# Captures on-commit work and runs it: pytest-django's ``django_capture_on_commit_callbacks``.
Capture = Callable[..., Any]


def make_user(username: str, *roles: str, superuser: bool = False, project: Any = None) -> Any:
    """A user named ``username`` (password ``PASSWORD``), a member of ``project`` (default: the
    default project) with ``roles`` (``projects.roles.Role`` values; operator and reviewer
    together make an admin), or a superuser."""
    from django.contrib.auth import get_user_model

    from projects.roles import Role
    from projects.services import membership_set, project_default

    user_model = get_user_model()
    if superuser:
        user = user_model.objects.create_superuser(username, f"{username}@example.com", PASSWORD)
    else:
        user = user_model.objects.create_user(username, f"{username}@example.com", PASSWORD)
    if roles:
        held = set(roles)
        role = Role.ADMIN if {Role.OPERATOR, Role.REVIEWER} <= held else held.pop()
        membership_set(project=project or project_default(), user=user, role=role)
    return user


def make_token(user: Any, project: Any = None, **options: Any) -> str:
    """The text of a new API token of ``user`` in ``project`` (default: the default project);
    ``options`` go to ``projects.services.token_create`` (``name``, ``ttl_seconds``)."""
    from projects.services import project_default, token_create

    return token_create(user=user, project=project or project_default(), **options)[1]


def token_api(token: str) -> Any:
    """A DRF test client sending ``Authorization: Token <token>``, as a client app does."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def send_email_step(args: dict[str, Any] | None = None, rationale: str = "") -> dict[str, Any]:
    """A ``send_email`` step (high risk: it waits for a reviewer) with ``args`` (default
    ``EMAIL_ARGS``)."""
    step: dict[str, Any] = {"tool": "send_email", "args": args or EMAIL_ARGS}
    if rationale:
        step["rationale"] = rationale
    return step


def make_run(
    user: Any,
    *,
    agent: str = "plan",
    goal: str = "test run",
    capture: Capture | None = None,
    via_api: bool = False,
    **fields: Any,
) -> Run:
    """A run of ``agent`` (``plan``, ``client``, ...) requested by ``user`` (through the API
    with ``via_api``), made by ``runs.control.create.run_create`` with ``fields`` (``steps``,
    ``project``, ``session``, ``budget``, ...). With ``capture`` its on-commit work
    runs (a plan run advances as far as it goes, a client run starts); without it nothing
    after the creation runs (in a transactional test Django runs it at the commit). Returns the
    run as created: read it back for what its on-commit work changed."""
    actor = Actor.for_user(user, via_api=via_api)
    if capture is None:
        return run_create(actor=actor, agent=agent, goal=goal, **fields)
    with capture(execute=True):
        return run_create(actor=actor, agent=agent, goal=goal, **fields)


def plan_run(
    user: Any,
    steps: Sequence[dict[str, Any]],
    *,
    capture: Capture,
    goal: str = "test run",
    project: Any = None,
) -> Run:
    """A plan run of ``steps`` requested by ``user`` in ``project`` (default: the default
    project), advanced as far as it goes (until its end or a gate); returns it read back."""
    with capture(execute=True):
        run = run_create(
            actor=Actor.for_user(user), agent="plan", goal=goal, steps=list(steps), project=project
        )
    return Run.objects.get(pk=run.pk)


def run_awaiting_approval(
    user: Any,
    *,
    capture: Capture,
    before: Sequence[dict[str, Any]] = (),
    after: Sequence[dict[str, Any]] = (),
    args: dict[str, Any] | None = None,
    goal: str = "mail the customer",
    project: Any = None,
) -> Run:
    """A plan run of ``before`` steps, a ``send_email`` step (with ``args``) and ``after``
    steps, requested by ``user`` in ``project`` and stopped at the email's approval gate.

    Raises:
        AssertionError: the run did not stop there (a ``before`` step failed or waits).
    """
    steps = [*before, send_email_step(args), *after]
    run = plan_run(user, steps, capture=capture, goal=goal, project=project)
    assert run.status_info.value == "awaiting_approval", run.status
    return run


def run_row(
    status: str = RunStatus.QUEUED,
    *,
    goal: str = "fsm",
    steps: Sequence[dict[str, Any]] = (),
    **fields: Any,
) -> Run:
    """A plan run's row written as it is, in ``status`` with ``fields`` (``gate``, ...): the
    FSM forbids assigning a protected status, so the row is created in it. Each of ``steps``
    (``Step`` fields; ``tool`` is ``echo`` and ``args`` empty unless given) becomes a step row
    at its place in the list, with an idempotency key of its own. Nothing else is written (no
    checkpoint, no audit event): for tests of a model's transitions, or of a read over rows in
    states the services reach only after many steps."""
    run = Run.objects.create(goal=goal, agent="plan", status=status, **fields)
    for index, step in enumerate(steps):
        made = {"tool": "echo", "args": {}, **step}
        key = f"{run.pk}:{index}:{made['tool']}"
        Step.objects.create(run=run, index=index, idempotency_key=key, **made)
    return run
