"""CI's side of an eval: ``python -m agentops_client.evals`` fetches a case set's cases from a
live server, replays them with an agent version of its own process and posts the outcomes;
it exits 1 when the pass rate is below the threshold, 0 otherwise."""

from __future__ import annotations

import pytest
from agentops_client.evals import main

from agentops.actors import Actor
from evals.models import EvalRun
from evals.services import case_set_create
from evals.tau_bench import cases_import_tau_bench
from projects.services import project_default
from testsupport.factories import make_token

pytestmark = pytest.mark.django_db(transaction=True)

CANCEL = '{"reservation_id": "ZFA04Y"}'
CONVERSATION = {
    "task_id": 1,
    "trial": 0,
    "traj": [
        {"role": "system", "content": "You are an airline agent."},
        {"role": "user", "content": "Cancel ZFA04Y, yes I am sure."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "function": {"name": "cancel_reservation", "arguments": CANCEL}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "name": "cancel_reservation", "content": "done"},
        {"role": "assistant", "content": "Cancelled."},
    ],
}


def cancels_it(replay):
    """The agent version that does what the recording did."""
    assert replay.call_tool("cancel_reservation", {"reservation_id": "ZFA04Y"}) == "done"
    return "Cancelled."


def cancels_another(replay):
    """The agent version that cancels the wrong reservation."""
    replay.call_tool("cancel_reservation", {"reservation_id": "Y40AFZ"})
    return "Cancelled."


def test_the_command_line_exits_non_zero_below_the_threshold(asgi_server, operator, capsys):
    actor = Actor.for_user(operator)
    case_set = case_set_create(project_id=project_default().pk, name="ci", actor=actor)
    cases_import_tau_bench(
        case_set_id=case_set.pk,
        conversations=[CONVERSATION],
        write_tools=["cancel_reservation"],
        actor=actor,
    )
    token = make_token(operator)

    def run(agent: str, label: str) -> int:
        return main(
            [
                str(case_set.pk),
                "--agent",
                f"tests.evals.test_ci_command_line:{agent}",
                "--agent-version",
                label,
                "--threshold",
                "1",
                "--url",
                asgi_server.url,
                "--token",
                token,
            ]
        )

    assert run("cancels_it", "good") == 0
    assert "1/1 passed" in capsys.readouterr().out
    assert run("cancels_another", "bad") == 1
    assert "0/1 passed" in capsys.readouterr().out
    bad = EvalRun.objects.get(agent_version="bad")
    assert bad.below_threshold
    assert bad.results.get().made == [
        {"tool": "cancel_reservation", "args": {"reservation_id": "Y40AFZ"}, "sandboxed": True}
    ]
