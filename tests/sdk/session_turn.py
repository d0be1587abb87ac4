"""One turn of an OpenAI Agents SDK agent whose conversation lives in an agentops session, run
as its own process by ``test_sdk_sessions``: ``python -m tests.sdk.session_turn AGENTOPS_URL
TOKEN SESSION_ID MODEL_URL MODEL MESSAGE``. It prints the agent's final output."""

from __future__ import annotations

import asyncio
import sys

from agentops_client import AsyncClient
from agentops_client.openai_agents import AgentOpsSession
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner
from openai import AsyncOpenAI


async def turn(url: str, token: str, session_id: str, model_url: str, model: str, text: str) -> str:
    openai = AsyncOpenAI(base_url=f"{model_url}/v1", api_key="replay", max_retries=0)
    agent = Agent(
        name="assistant",
        model=OpenAIChatCompletionsModel(model=model, openai_client=openai),
    )
    async with AsyncClient(url, token, websocket=False) as client:
        result = await Runner.run(
            agent,
            text,
            session=AgentOpsSession(client, session_id),
            run_config=RunConfig(tracing_disabled=True),
        )
    return str(result.final_output)


if __name__ == "__main__":
    print(asyncio.run(turn(*sys.argv[1:7])))
