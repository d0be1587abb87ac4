"""The kinds a run's model fields choose from: risk, agent kind, executor, what crossing a
budget does."""

from __future__ import annotations

from django.db import models


class Risk(models.TextChoices):
    LOW = "low", "Low"
    MEDIUM = "medium", "Medium"
    HIGH = "high", "High"
    CRITICAL = "critical", "Critical"
    # A risk class only rules give: the call is refused before any gate, project-wide.
    DENY = "deny", "Deny (refused)"


class AgentKind(models.TextChoices):
    """Where a run's steps come from (see ``runs.agents``)."""

    PLAN = "plan", "Fixed plan"
    CLIENT = "client", "Client app"
    TRANSCRIPT = "transcript", "Recorded transcript"
    MCP = "mcp", "MCP client (through the gateway)"


# Runs whose steps a client appends (and runs, for client steps) until it says it is done: a
# client app over the REST API, or an MCP client whose tool calls pass the gateway.
CLIENT_DRIVEN = frozenset({AgentKind.CLIENT, AgentKind.MCP})


class Executor(models.TextChoices):
    """Who runs a step's tool: agentops' workers (a registered tool) or the client app."""

    SERVER = "server", "agentops workers"
    CLIENT = "client", "Client app"


class OnBudgetExceeded(models.TextChoices):
    """What crossing a run's budget does (``runs.budget``)."""

    FAIL = "fail", "Fail the run"
    APPROVE = "approve", "Ask a reviewer to continue"


class OnFailure(models.TextChoices):
    """What a run's failure does (``runs.control.compensation``)."""

    STOP = "stop", "Stop (an operator may compensate)"
    COMPENSATE = "compensate", "Compensate its steps"
