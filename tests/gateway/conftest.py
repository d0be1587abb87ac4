"""Fixtures of the gateway tests: a stdio upstream (``upstream_server``) registered behind the
gateway, its log of the calls it received, and an MCP client of the gateway."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from gateway.services import upstream_register


@pytest.fixture
def upstream_log(tmp_path: Path) -> Path:
    return tmp_path / "upstream.jsonl"


@pytest.fixture
def bank(seeded: None, upstream_log: Path) -> Any:
    command = f"{sys.executable} -m tests.gateway.upstream_server --log {upstream_log}"
    return upstream_register(name=f"bank-{upstream_log.parent.name[-8:]}", command=command)


def seen(log: Path) -> list[dict[str, Any]]:
    """The calls the upstream received, in order."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def text(result: CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


@asynccontextmanager
async def gateway_client(url: str, token: str, **options: Any) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with Client(streamable_http_client(url, http_client=http), **options) as client:
        yield client
