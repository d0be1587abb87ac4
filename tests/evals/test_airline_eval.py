"""The airline example's two agent versions replayed against 30 cases made from the τ-bench
conversations: the recorded version passes every case, the altered one fails exactly the five
conversations of ``model_server.ALTERED``, shown as regressions; no write ran (the airline
data is unchanged, row for row)."""

from __future__ import annotations

import json
import os
import re

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from agentops.actors import Actor
from evals.models import EvalRun
from evals.selectors import eval_runs_compared
from evals.services import case_set_create
from evals.tau_bench import cases_import_tau_bench
from examples.airline import model_server
from examples.airline.store import Store
from examples.airline.tools import WRITE_TOOLS
from projects.services import project_default
from tests.examples.test_airline_replay import TRAJECTORIES

pytestmark = pytest.mark.django_db


def _rows(store: Store) -> list[tuple[str, ...]]:
    with store.pool.connection() as conn:
        docs = conn.execute("SELECT world, kind, key, doc FROM airline_doc ORDER BY 1, 2, 3")
        effects = conn.execute("SELECT world, idempotency_key, output FROM airline_effect")
        return [*docs.fetchall(), *effects.fetchall()]


@pytest.fixture
def store():
    store = Store(os.environ["AIRLINE_TEST_DATABASE_URL"], size=2)
    store.create_world("evals")
    yield store
    store.close()


def test_the_altered_version_regresses_exactly_its_five_conversations(operator, store):
    actor = Actor.for_user(operator)
    case_set = case_set_create(project_id=project_default().pk, name="airline", actor=actor)
    conversations = json.loads(TRAJECTORIES.read_text())
    cases = cases_import_tau_bench(
        case_set_id=case_set.pk,
        conversations=conversations,
        write_tools=sorted(WRITE_TOOLS),
        limit=30,
        actor=actor,
    )
    assert len(cases) == 30
    before = _rows(store)

    call_command(
        "run_eval",
        case_set.pk,
        agent="examples.airline.eval_agent:recorded",
        agent_version="recorded",
        threshold=1.0,
    )
    with pytest.raises(CommandError, match="below"):
        call_command(
            "run_eval",
            case_set.pk,
            agent="examples.airline.eval_agent:altered",
            agent_version="altered",
            threshold=1.0,
        )

    recorded = EvalRun.objects.get(agent_version="recorded")
    altered = EvalRun.objects.get(agent_version="altered")
    assert (recorded.passed, recorded.total) == (30, 30)
    assert (altered.passed, altered.total) == (25, 30)
    rows = eval_runs_compared(first=recorded, second=altered)
    regressed = {
        model_server.model_name(row.case.metadata["task_id"], row.case.metadata["trial"])
        for row in rows
        if row.change == "regressed"
    }
    assert regressed == model_server.ALTERED
    assert [row.change for row in rows].count("same") == 25
    backwards = eval_runs_compared(first=altered, second=recorded)
    assert [row.change for row in backwards].count("fixed") == 5
    # The comparison page shows exactly those five as regressions.
    browser = Client()
    browser.force_login(operator)
    page = browser.get(f"/evals/compare/?first={recorded.pk}&second={altered.pk}")
    shown = re.findall(r'<tr data-change="regressed"><td>([^<]+)</td>', page.content.decode())
    names = {f"τ-bench task {name.split('/')[1]}, trial 0" for name in model_server.ALTERED}
    assert set(shown) == names
    assert len(shown) == 5
    # Every write call the agents made was sandboxed, and the airline data is as it was.
    made = [call for result in altered.results.all() for call in result.made]
    writes = [call for call in made if call["tool"] in WRITE_TOOLS]
    assert writes
    assert all(call["sandboxed"] for call in writes)
    assert _rows(store) == before
