"""The airline tools as an MCP server: started as a subprocess and driven over stdio by the
``mcp`` SDK's client, it lists the 14 tools with τ-bench's schemas and their annotations, gives
the recorded outputs of real conversations (each in its own world), acts once per idempotency
key on the world its environment names, and answers bad calls with tool errors."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import cast

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult, RequestParamsMeta, TextContent, Tool
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from examples.airline.replay import recorded_calls, same_output
from examples.airline.store import Store
from examples.airline.tools import tool_specs
from tests.examples.test_airline_replay import AIRLINE_DSN, DATA, TRAJECTORIES

ROOT = Path(__file__).resolve().parents[2]
CONVERSATIONS = json.loads(TRAJECTORIES.read_text())
READ = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True}
WRITE = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False}
IDEMPOTENT_WRITE = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True}
ANNOTATIONS = {
    name: {**hints, "openWorldHint": False}
    for name, hints in {
        "book_reservation": WRITE,
        "calculate": READ,
        "cancel_reservation": WRITE,
        "get_reservation_details": READ,
        "get_user_details": READ,
        "list_all_airports": READ,
        "search_direct_flight": READ,
        "search_onestop_flight": READ,
        "send_certificate": WRITE,
        "think": READ,
        "transfer_to_human_agents": READ,
        "update_reservation_baggages": IDEMPOTENT_WRITE,
        "update_reservation_flights": IDEMPOTENT_WRITE,
        "update_reservation_passengers": IDEMPOTENT_WRITE,
    }.items()
}
WRITES = {name for name, hints in ANNOTATIONS.items() if not hints["readOnlyHint"]}


@asynccontextmanager
async def airline_server(
    *args: str, env: dict[str, str] | None = None, mode: str = "auto"
) -> AsyncIterator[Client]:
    """A client of ``python -m examples.airline.mcp_server ARGS`` started over stdio."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "examples.airline.mcp_server", "--data-dir", str(DATA), *args],
        env={"PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT)), **(env or {})},
        cwd=ROOT,
    )
    async with Client(params, mode=mode, read_timeout_seconds=30) as client:
        yield client


def meta(entries: dict[str, str]) -> RequestParamsMeta:
    """``entries`` as a request's ``_meta`` (an open map, which mypy takes for a closed one)."""
    return cast(RequestParamsMeta, entries)


def text(result: CallToolResult) -> str:
    """The one text block of a tool result."""
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_tools_are_listed_with_taubench_schemas_and_annotations(mode):
    async def listed() -> tuple[str, list[Tool]]:
        async with airline_server("--airline-db", AIRLINE_DSN, mode=mode) as client:
            return client.protocol_version, (await client.list_tools()).tools

    version, tools = asyncio.run(listed())
    # The SDK's client probes for the 2026 protocol first; "legacy" opens with initialize.
    assert (version in MODERN_PROTOCOL_VERSIONS) == (mode == "auto")
    specs = {s["function"]["name"]: s["function"] for s in tool_specs(DATA)}
    assert [tool.name for tool in tools] == sorted(ANNOTATIONS) == sorted(specs)
    for tool in tools:
        wire = tool.model_dump(by_alias=True, exclude_none=True)
        assert wire["annotations"] == ANNOTATIONS[tool.name], tool.name
        assert wire["description"] == specs[tool.name]["description"]
        assert wire["inputSchema"] == specs[tool.name]["parameters"]
    by_name = {tool.name: tool for tool in tools}
    assert by_name["get_user_details"].description == (
        "Get the details of an user, including their reservations."
    )
    assert by_name["send_certificate"].input_schema == {
        "type": "object",
        "properties": {
            "user_id": {
                "type": "string",
                "description": (
                    "The ID of the user to book the reservation, such as 'sara_doe_496'."
                ),
            },
            "amount": {"type": "number", "description": "Certificate amount to send."},
        },
        "required": ["user_id", "amount"],
    }


def test_recorded_conversations_get_the_recorded_outputs_each_in_its_own_world():
    # Bookings, flight and baggage changes, cancellations and τ-bench error outputs.
    chosen = [CONVERSATIONS[i] for i in (0, 14, 15, 28)]

    async def replayed() -> list[tuple[str, str, CallToolResult]]:
        found = []
        async with airline_server("--airline-db", AIRLINE_DSN) as client:
            for conversation in chosen:
                world = meta({"agentops/world": f"test:mcp:{uuid.uuid4().hex}"})
                for name, args, recorded in recorded_calls(conversation["traj"]):
                    result = await client.call_tool(name, args, meta=world)
                    found.append((name, recorded, result))
        return found

    found = asyncio.run(replayed())
    assert len(found) == 32
    assert {name for name, _, _ in found} & WRITES == {
        "book_reservation",
        "cancel_reservation",
        "update_reservation_baggages",
        "update_reservation_flights",
    }
    differing = [
        (name, text(result)[:100], recorded[:100])
        for name, recorded, result in found
        if not same_output(name, text(result), recorded)
    ]
    assert differing == []
    # τ-bench's error outputs, and only they, are tool errors.
    assert [name for name, _, result in found if result.is_error] == [
        name for name, recorded, _ in found if recorded.startswith("Error:")
    ]
    assert sum(result.is_error for _, _, result in found) == 2


def test_the_environment_names_the_world_and_a_keyed_write_acts_once():
    world = f"test:mcp:{uuid.uuid4().hex}"
    args = {"user_id": "mia_li_3668", "amount": 100}
    keyed = meta({"agentops/idempotency-key": "k1"})

    async def written() -> list[str]:
        env = {"AIRLINE_DATABASE_URL": AIRLINE_DSN, "AIRLINE_WORLD": world}
        async with airline_server(env=env) as client:
            return [
                text(await client.call_tool("send_certificate", args, meta=keyed)),
                text(await client.call_tool("send_certificate", args, meta=keyed)),
                text(await client.call_tool("send_certificate", args)),
            ]

    outputs = asyncio.run(written())
    assert outputs == [
        "Certificate certificate_3221322 added to user mia_li_3668 with amount 100.",
        "Certificate certificate_3221322 added to user mia_li_3668 with amount 100.",
        "Certificate certificate_3221323 added to user mia_li_3668 with amount 100.",
    ]
    store = Store(AIRLINE_DSN, DATA)
    try:
        methods = store.documents(world)["users"]["mia_li_3668"]["payment_methods"]
        effects = store.effects(world)
    finally:
        store.close()
    assert {"certificate_3221322", "certificate_3221323"} <= set(methods)
    # The keyed write, then the unkeyed one under a key of the server's own.
    assert [key.split(":")[0] for key, _tool, _output in effects] == ["k1", "mcp"]


def test_bad_calls_are_tool_errors_and_the_server_keeps_serving():
    calls = [
        ("get_user_details", {"user": "mia_li_3668"}, None),
        ("cancel_reservation", {}, None),
        ("drop_tables", {}, None),
        ("get_user_details", {"user_id": "mia_li_3668"}, meta({"agentops/world": "template:x"})),
        ("get_user_details", {"user_id": "nobody"}, None),
    ]

    async def answered() -> tuple[list[CallToolResult], CallToolResult]:
        async with airline_server("--airline-db", AIRLINE_DSN) as client:
            bad = [await client.call_tool(name, args, meta=m) for name, args, m in calls]
            good = await client.call_tool("get_user_details", {"user_id": "mia_li_3668"})
            return bad, good

    bad, good = asyncio.run(answered())
    assert [(result.is_error, text(result)) for result in bad] == [
        (True, "Error: get_user_details() got an unexpected keyword argument 'user'"),
        (
            True,
            "Error: cancel_reservation() missing 1 required positional argument: 'reservation_id'",
        ),
        (True, "Error: unknown airline tool 'drop_tables'"),
        (True, "Error: world 'template:x' is the data files' template, never written"),
        (True, "Error: user not found"),
    ]
    assert not good.is_error
    assert json.loads(text(good))["name"] == {"first_name": "Mia", "last_name": "Li"}
