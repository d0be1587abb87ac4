"""The SDK's integrations report what drives a run (issue 36, part 1) against a live server:
the OpenAI Agents SDK hooks (``AgentOpsHooks``: the agent's name, the version given, the
system prompt the model is sent, its model settings) and the LangGraph callback handler
(``AgentOpsCallbackHandler``: the name and version given, the graph's system message, the
chat model's parameters)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentops_client import AsyncClient, Client
from agentops_client.langgraph import AgentOpsCallbackHandler
from agentops_client.openai_agents import AgentOpsHooks
from agents import Agent, ModelSettings, Runner
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, SystemMessage
from langgraph.graph import START, MessagesState, StateGraph
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from runs.models import ModelCall, Run
from testsupport.factories import make_token, make_user

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

INSTRUCTIONS = "You answer questions about refunds, briefly."


class Scripted(Model):
    """A model answering each turn with the next of ``answers`` (no network)."""

    model = "scripted-4o"

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        text = ResponseOutputText(type="output_text", text=self.answers.pop(0), annotations=[])
        message = ResponseOutputMessage(
            id="msg-1", type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(
            output=[message],
            usage=Usage(requests=1, input_tokens=40, output_tokens=8),
            response_id=None,
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("not streamed in these tests")


@pytest.fixture
def token(worker, asgi_server, seeded) -> str:
    return make_token(make_user("identity-agent", "operator"))


def test_the_agents_sdk_hooks_report_the_agent_prompt_and_settings(asgi_server, token):
    async def scenario() -> str:
        client = AsyncClient(asgi_server.url, token)
        try:
            run = await client.start_run("refund question")
            agent = Agent(
                name="refunds desk",
                instructions=INSTRUCTIONS,
                model=Scripted(["At most $100.", "Yes."]),
                model_settings=ModelSettings(temperature=0.3, extra_headers={"x-key": "secret"}),
            )
            hooks = AgentOpsHooks(
                run, agent_version="3.1.0", prompt_name="refunds", prompt_version="v3"
            )
            await Runner.run(agent, "How much may you refund?", hooks=hooks)
            await Runner.run(agent, "Really?", hooks=hooks)
            return run.run_id
        finally:
            await client.aclose()

    run_id = asyncio.run(scenario())
    run = Run.objects.select_related("prompt").get(pk=run_id)
    assert (run.agent_name, run.agent_version, run.model) == (
        "refunds desk",
        "3.1.0",
        "scripted-4o",
    )
    assert (run.prompt.content, run.prompt_name, run.prompt_version) == (
        INSTRUCTIONS,
        "refunds",
        "v3",
    )
    # Only the chosen settings: never the extra headers (they may hold credentials).
    assert run.model_parameters == {"temperature": 0.3}
    calls = ModelCall.objects.filter(run_id=run_id).select_related("prompt")
    assert [(c.prompt.content, c.parameters) for c in calls] == [
        (INSTRUCTIONS, {"temperature": 0.3})
    ] * 2


def test_the_langgraph_handler_reports_the_agent_prompt_and_parameters(asgi_server, token):
    model = GenericFakeChatModel(messages=iter([AIMessage(content="At most $100.")]))

    def call_model(state: MessagesState) -> dict[str, Any]:
        sent = [SystemMessage(content=INSTRUCTIONS), *state["messages"]]
        return {"messages": [model.invoke(sent, temperature=0.1)]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_edge(START, "model")
    app = graph.compile()
    with Client(asgi_server.url, token) as client:
        run = client.start_run("refund question")
        handler = AgentOpsCallbackHandler(
            run, agent_name="graph desk", agent_version="0.9", prompt_version="v9"
        )
        app.invoke({"messages": [("user", "How much?")]}, {"callbacks": [handler]})
    stored = Run.objects.select_related("prompt").get(pk=run.run_id)
    assert (stored.agent_name, stored.agent_version, stored.prompt_version) == (
        "graph desk",
        "0.9",
        "v9",
    )
    assert stored.prompt.content == INSTRUCTIONS
    assert stored.model_parameters == {"temperature": 0.1}
