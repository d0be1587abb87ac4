"""Upstream MCP servers the gateway stands in front of."""

from __future__ import annotations

import shlex

from django.db import models


class Transport(models.TextChoices):
    """How the gateway reaches an upstream: a command it starts and talks to over stdio, or a
    streamable-HTTP URL."""

    STDIO = "stdio", "stdio (a command agentops starts)"
    HTTP = "http", "streamable HTTP (a URL)"


class Upstream(models.Model):
    """An MCP server reached through ``/mcp/<name>/``: each MCP client session there is a run
    (agent ``mcp``) and each ``tools/call`` a client step that agentops classifies, may hold
    for a reviewer, forwards to this server and records.

    ``command`` (stdio: the command line, split like a shell) or ``url`` (http, with
    ``headers`` sent on every request, e.g. its own credentials). ``tools`` is the server's
    last fetched ``tools/list`` (MCP tool objects as JSON: name, description, inputSchema,
    annotations), fetched at ``tools_fetched_at``.

    ``project`` is the project whose policy it belongs to: only that project's tokens reach
    it (any other caller is answered as for an upstream that does not exist); empty: a
    global upstream, for every project. Set by superusers (a stdio upstream runs a command on
    the server), each change audited in the project's chain (``runs.policy``).
    """

    name = models.SlugField(max_length=50, unique=True, help_text="The gateway path: /mcp/<name>/")
    project = models.ForeignKey(
        "projects.Project",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="mcp_upstreams",
        help_text="Only this project's tokens reach it; empty: every project's.",
    )
    transport = models.CharField(max_length=8, choices=Transport.choices)
    command = models.TextField(blank=True, help_text="stdio: the command line to start it")
    url = models.URLField(max_length=500, blank=True, help_text="http: its streamable-HTTP URL")
    headers = models.JSONField(default=dict, blank=True, help_text="http: headers to send")
    enabled = models.BooleanField(default=True)
    tools = models.JSONField(default=list, blank=True, editable=False)
    tools_fetched_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(transport="stdio") & ~models.Q(command=""))
                | (models.Q(transport="http") & ~models.Q(url="")),
                name="upstream_has_its_address",
            )
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def argv(self) -> list[str]:
        """The stdio command as an argument list."""
        return shlex.split(self.command)

    def tool(self, name: str) -> dict | None:
        """The cached tool ``name`` (MCP JSON), or None."""
        return next((t for t in self.tools if t.get("name") == name), None)


class McpSession(models.Model):
    """An MCP client session through the gateway (its ``Mcp-Session-Id``) and its run. The
    session belongs to the run's requester in the run's project (``gateway.calls``); its id
    is shown to superusers only (admin), never in the run itself."""

    session_id = models.CharField(max_length=128, unique=True)
    upstream = models.ForeignKey(Upstream, on_delete=models.PROTECT, related_name="sessions")
    run = models.OneToOneField("runs.Run", on_delete=models.CASCADE, related_name="mcp_session")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.upstream} session of run {self.run_id}"
