"""The runs page filters by goal, tool, agent, requester, project, status and creation time,
keeps the filters in its pager links and fragment, shows what is wrong with a bad value, and
lists only runs of the user's projects in a fixed number of queries."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse

from runs import list_views
from runs.models import Run
from testsupport.factories import plan_run
from testsupport.fleet import CALCULATE, at, create_run_at, make_fleet

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(operator):
    return make_fleet(operator)


def listed(client, url_name="run-list", **params):
    response = client.get(reverse(url_name), params)
    assert response.status_code == 200, response.content.decode()
    return re.findall(r'data-run-id="([0-9a-f-]+)"', response.content.decode())


def ids(*runs):
    return [str(run.pk) for run in runs]


def test_the_filters_narrow_the_list_and_combine(client, fleet):
    client.force_login(fleet.viewer)
    assert listed(client) == ids(fleet.gamma, fleet.client, fleet.sums, fleet.mail)
    assert listed(client, goal="mail") == ids(fleet.gamma, fleet.mail)
    assert listed(client, tool="calculate") == ids(fleet.sums, fleet.mail)
    assert listed(client, agent="client") == ids(fleet.client)
    assert listed(client, requester="omar") == ids(fleet.client)
    assert listed(client, project="gamma") == ids(fleet.gamma)
    assert listed(client, status="cancelled") == ids(fleet.client)
    # As the form's datetime-local fields send them: no seconds, no time zone (UTC).
    window = {"created_from": "2026-01-11T00:00", "created_to": "2026-01-12T00:00"}
    assert listed(client, **window) == ids(fleet.sums)
    assert listed(client, goal="mail", tool="calculate", agent="plan") == ids(fleet.mail)
    # The form sends every field; the empty ones are no filter.
    blank = {"goal": "", "tool": "", "agent": "", "requester": "", "project": "", "status": ""}
    assert listed(client, **blank) == listed(client)


def test_the_form_shows_the_filters_given(client, fleet):
    client.force_login(fleet.viewer)
    params = {"goal": "mail", "created_from": "2026-01-11T01:00:00+01:00", "agent": "plan"}
    html = client.get(reverse("run-list"), params).content.decode()
    assert 'name="goal" value="mail"' in html
    # In UTC, as the datetime-local field can show it.
    assert 'name="created_from" value="2026-01-11T00:00:00"' in html
    assert '<option value="plan" selected>' in html


def test_the_fragment_applies_the_same_filters(client, fleet):
    client.force_login(fleet.viewer)
    assert listed(client, "run-list-fragment", tool="send_email") == ids(fleet.gamma, fleet.mail)


def test_another_projects_runs_never_appear(client, fleet):
    client.force_login(fleet.viewer)
    for params in ({}, {"project": "beta"}, {"requester": "beth"}, {"goal": "beta"}):
        assert str(fleet.beta.pk) not in listed(client, **params)
    html = client.get(reverse("run-list")).content.decode()
    assert 'value="gamma"' in html
    assert 'value="beta"' not in html


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"created_from": "last tuesday"}, "created_from: Enter a valid date/time."),
        ({"status": "sleeping"}, "status: Select a valid choice. sleeping is not one"),
        ({"goal": "a\x00b"}, "goal: Null characters are not allowed."),
        ({"goal": "x" * 201}, "goal: Ensure this value has at most 200 characters"),
        (
            {"created_from": "2026-01-12T00:00", "created_to": "2026-01-11T00:00"},
            "created_to: must be later than created_from",
        ),
    ],
)
def test_a_bad_filter_value_says_what_is_wrong_and_lists_nothing(client, fleet, params, says):
    client.force_login(fleet.viewer)
    for name in ("run-list", "run-list-fragment"):
        response = client.get(reverse(name), params)
        assert response.status_code == 400
        html = response.content.decode()
        assert "data-filter-problems" in html
        assert says in html.replace("&#x27;", "'")
        assert "data-run-id" not in html


def test_columns_show_steps_duration_tokens_and_cost(
    client, operator, django_capture_on_commit_callbacks
):
    run = plan_run(operator, [CALCULATE, CALCULATE], capture=django_capture_on_commit_callbacks)
    Run.objects.filter(pk=run.pk).update(
        usage_tokens=1234,
        cost_usd="0.125000",
        started_at=run.finished_at - timedelta(seconds=95),
    )
    client.force_login(operator)
    html = client.get(reverse("run-list")).content.decode()
    row = html[html.index(f'data-run-id="{run.pk}"') :]
    assert re.search(r"data-steps>2/2<", row)
    assert re.search(r"data-duration[^>]*>1 min 35 s<", row)
    assert re.search(r"data-tokens>1,234<", row)
    assert re.search(r"data-cost>0.1250<", row)


def test_pager_links_keep_the_filters(client, operator, monkeypatch):
    monkeypatch.setattr(list_views, "RUNS_PER_PAGE", 2)
    for day in (1, 2, 3):
        create_run_at(operator, f"Mail {day}", [CALCULATE], at(day))
    create_run_at(operator, "Other", [CALCULATE], at(4))
    client.force_login(operator)
    html = client.get(reverse("run-list"), {"goal": "mail", "tool": "calculate"}).content.decode()
    link = (
        re.search(r'href="\?([^"]*cursor=[^"]*)" rel="next"', html).group(1).replace("&amp;", "&")
    )
    assert link.startswith("goal=mail&tool=calculate&cursor=")
    page_two = client.get(reverse("run-list") + "?" + link).content.decode()
    assert page_two.count("data-run-id") == 1
    assert "Mail 1" in page_two


def test_filtered_list_queries_do_not_grow_with_runs(
    client, operator, django_assert_max_num_queries
):
    params = {"goal": "mail", "tool": "calculate", "agent": "plan", "requester": "olivia"}
    create_run_at(operator, "Mail 0", [CALCULATE, CALCULATE], at(1))
    client.force_login(operator)
    with django_assert_max_num_queries(12) as small:
        assert client.get(reverse("run-list"), params).status_code == 200
    baseline = len(small)
    for day in range(2, 22):
        create_run_at(operator, f"Mail {day}", [CALCULATE, CALCULATE], at(day))
    with django_assert_max_num_queries(baseline):
        html = client.get(reverse("run-list"), params).content.decode()
    assert html.count("data-run-id") == 21
