"""A small fleet of runs for the runs list's filters: known goals, tools, agents, requesters,
projects, statuses and creation times, so a test can write down which runs each filter
lists."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agentops.actors import Actor
from projects.models import Project
from projects.services import membership_set, project_default
from runs.control.create import run_create
from runs.control.lifecycle import run_cancel
from runs.models import Run
from testsupport.factories import EMAIL_ARGS, make_user

CALCULATE = {"tool": "calculate", "args": {"expression": "1+1"}}
SEND_EMAIL = {"tool": "send_email", "args": EMAIL_ARGS}


def at(day: int, hour: int = 10) -> datetime:
    """A moment of January 2026, UTC."""
    return datetime(2026, 1, day, hour, tzinfo=UTC)


@dataclass
class Fleet:
    """The runs (not executed: they stay queued with pending steps, but ``client`` is
    cancelled) and the users who may see them. ``viewer`` is a viewer of the default project
    and of ``gamma``; ``beta`` is a project ``viewer`` is no member of."""

    mail: Run  # default project, plan, calculate + send_email, by olivia, Jan 10
    sums: Run  # default project, plan, calculate, by olivia, Jan 11
    client: Run  # default project, client agent, no steps, by omar, Jan 12, cancelled
    gamma: Run  # project gamma, plan, send_email, by olivia, Jan 13
    beta: Run  # project beta, plan, calculate + send_email, by beth, Jan 10 12:00
    viewer: Any
    operator: Any
    gamma_project: Project
    beta_project: Project


def create_run_at(
    user: Any, goal: str, steps: list[Any] | None, when: datetime, **options: Any
) -> Run:
    """A run of ``user`` (a plan of ``steps``, or a client run without them) created at
    ``when``, not executed; ``options`` go to ``run_create`` (``project``)."""
    agent = "plan" if steps else "client"
    run = run_create(
        actor=Actor.for_user(user), agent=agent, goal=goal, steps=steps or None, **options
    )
    Run.objects.filter(pk=run.pk).update(created_at=when)
    return Run.objects.get(pk=run.pk)


def make_fleet(operator: Any) -> Fleet:
    """Build the ``Fleet``; ``operator`` (an operator of the default project) is olivia."""
    gamma = Project.objects.create(slug="gamma", name="Gamma")
    beta = Project.objects.create(slug="beta", name="Beta")
    membership_set(project=gamma, user=operator, role="operator")
    omar = make_user("omar", "operator")
    beth = make_user("beth", "operator", project=beta)
    viewer = make_user("vera", "viewer")
    membership_set(project=gamma, user=viewer, role="viewer")
    fleet = Fleet(
        mail=create_run_at(operator, "Mail the Q3 report", [CALCULATE, SEND_EMAIL], at(10)),
        sums=create_run_at(operator, "Sum the invoices", [CALCULATE], at(11)),
        client=create_run_at(omar, "Refund order 7", None, at(12)),
        gamma=create_run_at(operator, "Mail gamma's numbers", [SEND_EMAIL], at(13), project=gamma),
        beta=create_run_at(
            beth, "Mail the beta report", [CALCULATE, SEND_EMAIL], at(10, 12), project=beta
        ),
        viewer=viewer,
        operator=operator,
        gamma_project=gamma,
        beta_project=beta,
    )
    run_cancel(run_id=fleet.client.pk, actor=Actor.for_user(omar))
    assert project_default().pk == fleet.mail.project_id
    return fleet
