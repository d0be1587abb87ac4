"""Full-text search of the runs list (``?q=``): a word of a run's goal, of a step's tool-call
arguments or result, or of its conversation finds the run, in the page and the API alike;
PostgreSQL answers it from the GIN expression indexes; hostile text is a 400 or no match,
never a 500; another project's run is never found."""

import re

import pytest
from django.db import connection
from django.urls import reverse

from projects.models import Project
from runs.filters import RunFilter
from runs.models import Message, Run, Step
from runs.selectors import run_list
from testsupport.factories import make_token, make_user, token_api
from testsupport.fleet import CALCULATE, at, create_run_at

pytestmark = pytest.mark.django_db

RESERVATION = "ZFA04Y"


def _email(subject):
    return {"tool": "send_email", "args": {"to": ["a@example.com"], "subject": subject, "body": ""}}


def listed(client, **params):
    response = client.get(reverse("run-list"), params)
    assert response.status_code == 200, response.content.decode()
    return set(re.findall(r'data-run-id="([0-9a-f-]+)"', response.content.decode()))


@pytest.fixture
def runs(operator):
    """A run whose reservation id is only in a call's arguments, one with a word only in a
    step's result, one with a word only in its conversation, and one with none of them."""
    in_args = create_run_at(
        operator, "Change the flight", [_email(f"Booking {RESERVATION}")], at(1)
    )
    in_result = create_run_at(operator, "Sum the invoices", [CALCULATE], at(2))
    Step.objects.filter(run=in_result).update(result={"value": "total for walrus ltd"})
    in_chat = create_run_at(operator, "Answer the customer", None, at(3))
    Message.objects.create(
        run=in_chat, position=0, role="user", content="my luggage tag is PX-7781 please help"
    )
    Message.objects.create(
        run=in_chat,
        position=1,
        role="assistant",
        content=None,
        tool_calls=[{"id": "c1", "type": "function", "function": {"name": "find_bag"}}],
    )
    other = create_run_at(operator, "Nothing to see", [CALCULATE], at(4))
    return {"args": in_args, "result": in_result, "chat": in_chat, "other": other}


def test_a_reservation_id_only_in_a_calls_arguments_finds_its_run(client, operator, runs):
    client.force_login(operator)
    assert RESERVATION not in runs["args"].goal
    assert listed(client, q=RESERVATION) == {str(runs["args"].pk)}
    assert listed(client, q=RESERVATION.lower()) == {str(runs["args"].pk)}


def test_words_of_results_conversations_and_goals_find_their_runs(client, operator, runs):
    client.force_login(operator)
    assert listed(client, q="walrus") == {str(runs["result"].pk)}
    assert listed(client, q="luggage") == {str(runs["chat"].pk)}
    assert listed(client, q="find_bag") == {str(runs["chat"].pk)}
    assert listed(client, q="invoices") == {str(runs["result"].pk)}
    assert listed(client, q="no-such-word-anywhere") == set()


def test_search_combines_with_the_other_filters(client, operator, runs):
    client.force_login(operator)
    assert listed(client, q="walrus", agent="client") == set()
    assert listed(client, q="luggage", agent="client") == {str(runs["chat"].pk)}


def test_the_api_searches_too(operator, runs):
    api = token_api(make_token(operator))
    response = api.get("/api/v1/runs/", {"q": RESERVATION})
    assert response.status_code == 200, response.content
    assert [row["id"] for row in response.json()["results"]] == [str(runs["args"].pk)]


def test_another_projects_run_is_not_found(client, operator, runs):
    beta = Project.objects.create(slug="beta", name="Beta")
    beth = make_user("beth", "operator", project=beta)
    hidden = create_run_at(
        beth, "Beta's change", [_email(f"Also {RESERVATION}")], at(5), project=beta
    )
    client.force_login(operator)
    assert str(hidden.pk) not in listed(client, q=RESERVATION)
    client.force_login(beth)
    assert listed(client, q=RESERVATION) == {str(hidden.pk)}


@pytest.mark.parametrize(
    "text",
    ['"unclosed', "a & | ! ( ) :* <->", "'; DROP TABLE runs_run; --", "-", "or", "\\", "🦭" * 50],
)
def test_hostile_search_text_lists_or_finds_nothing_but_never_fails(client, operator, runs, text):
    client.force_login(operator)
    response = client.get(reverse("run-list"), {"q": text})
    assert response.status_code == 200
    assert Run.objects.count() == 4


def test_a_nul_or_an_overlong_search_is_a_400_naming_it(client, operator, runs):
    client.force_login(operator)
    for text in ("a\x00b", "x" * 201):
        response = client.get(reverse("run-list"), {"q": text})
        assert response.status_code == 400
        assert "q:" in response.content.decode()
        assert "data-run-id" not in response.content.decode()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's indexes")
def test_postgresql_answers_from_the_search_indexes(operator, runs):
    queryset = RunFilter({"q": RESERVATION}, queryset=run_list()).qs
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = queryset.explain()
    for index in (
        "run_goal_search_idx",
        "step_args_search_idx",
        "step_result_search_idx",
        "message_content_search_idx",
        "message_calls_search_idx",
    ):
        assert index in plan, plan
