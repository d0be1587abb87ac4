"""``manage.py mcp_add NAME (--command "CMD ARGS" | --url URL) [--header K=V ...]``: register
an upstream MCP server behind ``/mcp/NAME/`` and print its tools."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentops.errors import InvalidInput
from gateway.services import upstream_refresh_tools, upstream_register
from gateway.upstream import UpstreamUnavailable


class Command(BaseCommand):
    help = (
        "Register (or replace) an upstream MCP server served at /mcp/NAME/: a stdio command "
        "agentops starts, or a streamable-HTTP URL; then fetch and print its tools."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        where = parser.add_mutually_exclusive_group(required=True)
        where.add_argument("--command", default="", help="stdio: the command line to start it")
        where.add_argument("--url", default="", help="streamable HTTP: its URL")
        parser.add_argument(
            "--header", action="append", default=[], help="K=V sent to an HTTP upstream"
        )

    def handle(self, *args: Any, name: str, **options: Any) -> None:
        headers = {}
        for item in options["header"]:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise CommandError(f"--header {item!r}: expected K=V")
            headers[key] = value
        try:
            upstream = upstream_register(
                name=name, command=options["command"], url=options["url"], headers=headers
            )
        except InvalidInput as exc:
            raise CommandError(exc.message) from None
        try:
            tools = upstream_refresh_tools(upstream)
        except UpstreamUnavailable as exc:
            message = f"registered {name}, but its tools could not be fetched: {exc}"
            raise CommandError(message) from None
        self.stdout.write(f"{name}: {len(tools)} tools at /mcp/{name}/")
        for tool in tools:
            hints = tool.get("annotations") or {}
            kind = "read-only" if hints.get("readOnlyHint") else "may write"
            self.stdout.write(f"  {tool['name']} ({kind})")
