"""Registering upstream MCP servers: ``manage.py mcp_add`` and admin fetch and show their tools
(names, annotations, schemas); bad registrations are refused with what is wrong."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from audit.models import AuditEvent
from gateway.models import Upstream
from testsupport.factories import make_user

pytestmark = pytest.mark.django_db


def _command(log: Path) -> str:
    return f"{sys.executable} -m tests.gateway.upstream_server --log {log}"


def test_mcp_add_registers_a_stdio_upstream_and_prints_its_tools(tmp_path, capsys):
    call_command("mcp_add", "bank", "--command", _command(tmp_path / "log"))
    out = capsys.readouterr().out
    assert "bank: 4 tools at /mcp/bank/" in out
    assert "transfer (may write)" in out
    assert "lookup (read-only)" in out
    upstream = Upstream.objects.get(name="bank")
    assert upstream.transport == "stdio"
    assert [t["name"] for t in upstream.tools] == ["lookup", "transfer", "slow", "quote"]
    assert upstream.tool("transfer")["annotations"]["destructiveHint"] is True
    assert upstream.tool("lookup")["inputSchema"]["required"] == ["account"]
    assert not (tmp_path / "log").exists()  # listing tools calls none
    (event,) = AuditEvent.objects.filter(verb="gateway.upstream.added")
    assert event.payload["name"] == "bank"
    assert event.chain == "system"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--header", "X-Key"], "expected K=V"),
        (["--url", "not a url"], "Enter a valid URL"),
    ],
)
def test_mcp_add_refuses_bad_input(db, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("mcp_add", "bad", *args, *([] if "--url" in args else ["--url", "http://x"]))
    assert not Upstream.objects.filter(name="bad", tools__len__gt=0).exists()


def test_an_unreachable_upstream_is_registered_without_tools(db):
    with pytest.raises(CommandError, match="could not be fetched"):
        call_command("mcp_add", "gone", "--url", "http://127.0.0.1:9/mcp/")
    assert Upstream.objects.get(name="gone").tools == []


def test_admin_shows_an_upstreams_tools_and_refreshes_them(tmp_path):
    call_command("mcp_add", "bank", "--command", _command(tmp_path / "log"))
    upstream = Upstream.objects.get(name="bank")
    Upstream.objects.filter(pk=upstream.pk).update(tools=[])
    client = Client()
    client.force_login(make_user("root", superuser=True))
    response = client.post(
        "/admin/gateway/upstream/",
        {"action": "refresh_tools", "_selected_action": [upstream.pk]},
        follow=True,
    )
    messages = [str(m) for m in response.context["messages"]]
    assert messages == ["bank: 4 tools"]
    page = client.get(f"/admin/gateway/upstream/{upstream.pk}/change/").content.decode()
    assert "<code>transfer</code>" in page
    assert "destructiveHint" in page
