"""The runs list sorts by its columns, pages stably (runs created after the list was opened
never shift a later page), keeps each user's saved views, and reads and shows date-times in
the browser's time zone; a bad sort, page link or zone is a 400 listing no run."""

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from runs import list_views
from runs.models import Run, SavedView
from testsupport.factories import make_user
from testsupport.fleet import CALCULATE, at, create_run_at

pytestmark = pytest.mark.django_db


def page(client, url=None, **params):
    response = client.get(url or reverse("run-list"), params)
    html = response.content.decode()
    return response.status_code, html, re.findall(r'data-run-id="([0-9a-f-]+)"', html)


def link(html, rel):
    found = re.search(rf'href="(\?[^"]*)" rel="{rel}"', html)
    return None if found is None else reverse("run-list") + found.group(1).replace("&amp;", "&")


@pytest.fixture
def five(operator):
    """Five runs created on January 1 to 5, their tokens 30, 10, 50, 20, 40."""
    runs = []
    for day, tokens in zip(range(1, 6), (30, 10, 50, 20, 40), strict=True):
        run = create_run_at(operator, f"Run {day}", [CALCULATE], at(day))
        Run.objects.filter(pk=run.pk).update(usage_tokens=tokens)
        runs.append(str(run.pk))
    return runs


def test_columns_sort_both_ways_and_the_header_says_which(client, operator, five):
    client.force_login(operator)
    _, html, ids = page(client, sort="tokens")
    assert ids == [five[1], five[3], five[0], five[4], five[2]]
    assert re.search(r'aria-sort="ascending"><a href="\?[^"]*sort=-tokens"', html)
    _, html, ids = page(client, sort="-tokens")
    assert ids == [five[2], five[4], five[0], five[3], five[1]]
    assert 'aria-sort="descending"' in html
    _, _, ids = page(client)
    assert ids == list(reversed(five))


def test_an_unknown_sort_is_a_400_listing_nothing(client, operator, five):
    client.force_login(operator)
    for sort in ("status", "-id", "tokens;drop", "--tokens"):
        status, html, ids = page(client, sort=sort)
        assert (status, ids) == (400, [])
        assert "sort:" in html


def test_later_pages_stay_put_while_new_runs_arrive(client, operator, five, monkeypatch):
    monkeypatch.setattr(list_views, "RUNS_PER_PAGE", 2)
    client.force_login(operator)
    _, html, first = page(client)
    assert first == [five[4], five[3]]
    _, html, second = page(client, link(html, "next"))
    assert second == [five[2], five[1]]
    third_url = link(html, "next")
    for day in (6, 7, 8):
        create_run_at(operator, f"New {day}", [CALCULATE], timezone.now())
    _, html, third = page(client, third_url)
    assert third == [five[0]]
    assert link(html, "next") is None
    _, html, back = page(client, link(html, "prev"))
    assert back == [five[2], five[1]]
    _, html, back = page(client, link(html, "prev"))
    assert back == [five[4], five[3]]
    assert link(html, "prev") is None
    # A list opened now starts with the new runs.
    _, _, fresh = page(client)
    assert len(fresh) == 2
    assert not set(fresh) & set(five)


def test_pages_of_a_sort_follow_that_sort(client, operator, five, monkeypatch):
    monkeypatch.setattr(list_views, "RUNS_PER_PAGE", 2)
    client.force_login(operator)
    _, html, ids = page(client, sort="tokens")
    _, html, more = page(client, link(html, "next"))
    _, _, last = page(client, link(html, "next"))
    assert ids + more + last == [five[1], five[3], five[0], five[4], five[2]]


def test_a_forged_or_foreign_page_link_is_a_400(client, operator, five, monkeypatch):
    monkeypatch.setattr(list_views, "RUNS_PER_PAGE", 2)
    client.force_login(operator)
    _, html, _ = page(client)
    cursor = re.search(r"cursor=([^\"&]+)", link(html, "next")).group(1)
    for params in (
        {"cursor": cursor[:-2] + "xx"},
        {"cursor": "e30"},
        {"cursor": cursor, "sort": "tokens"},
    ):
        status, html, ids = page(client, **params)
        assert (status, ids) == (400, [])
        assert "cursor:" in html


def test_saved_views_are_the_users_own(client, operator, five):
    client.force_login(operator)
    response = client.post(
        reverse("saved-view-create"),
        {"name": " Big ones ", "query": "sort=-tokens&goal=Run&cursor=abc&bogus=1"},
    )
    assert response.status_code == 302
    view = SavedView.objects.get(owner=operator)
    assert (view.name, view.query) == ("Big ones", "goal=Run&sort=-tokens")
    _, html, _ = page(client)
    assert 'href="/?goal=Run&amp;sort=-tokens">Big ones</a>' in html
    other = make_user("otto", "operator")
    client.force_login(other)
    _, html, _ = page(client)
    assert "Big ones" not in html
    assert client.post(reverse("saved-view-delete", args=[view.pk])).status_code == 404
    assert SavedView.objects.filter(pk=view.pk).exists()
    client.force_login(operator)
    assert client.post(reverse("saved-view-delete", args=[view.pk])).status_code == 302
    assert not SavedView.objects.exists()


@pytest.mark.parametrize("name", ["", "   ", "x" * 101, "nul\x00name"])
def test_a_bad_view_name_saves_nothing_and_says_why(client, operator, name):
    client.force_login(operator)
    response = client.post(
        reverse("saved-view-create"), {"name": name, "query": "sort=goal"}, follow=True
    )
    assert "Could not save the view" in response.content.decode()
    assert not SavedView.objects.exists()


def test_a_taken_view_name_saves_nothing(client, operator):
    client.force_login(operator)
    client.post(reverse("saved-view-create"), {"name": "Mine", "query": "sort=goal"})
    response = client.post(
        reverse("saved-view-create"), {"name": "Mine", "query": "sort=cost"}, follow=True
    )
    assert "already have a view named" in response.content.decode()
    assert list(SavedView.objects.values_list("query", flat=True)) == ["sort=goal"]


def test_date_filters_are_read_in_the_browsers_zone(client, operator):
    early = create_run_at(operator, "At ten UTC", [CALCULATE], at(10, 10))
    late = create_run_at(operator, "At noon UTC", [CALCULATE], at(10, 12))
    client.force_login(operator)
    # 12:30 in Paris (UTC+1 in January) is 11:30 UTC.
    _, html, ids = page(client, created_from="2026-01-10T12:30", tz="Europe/Paris")
    assert ids == [str(late.pk)]
    assert 'value="2026-01-10T12:30:00"' in html
    assert "data-zone-name>Europe/Paris<" in html
    _, _, ids = page(client, created_to="2026-01-10T12:30", tz="Europe/Paris")
    assert ids == [str(early.pk)]
    _, _, ids = page(client, created_from="2026-01-10T12:30")
    assert ids == []


def test_an_unknown_zone_is_a_400(client, operator, five):
    client.force_login(operator)
    for zone in ("Mars/Olympus", "../../etc", "x" * 300):
        status, html, ids = page(client, tz=zone)
        assert (status, ids) == (400, [])
        assert "tz:" in html


def test_rows_show_status_labels_local_times_and_separated_counts(client, operator, five):
    Run.objects.filter(pk=five[0]).update(usage_tokens=1234567)
    client.force_login(operator)
    _, html, _ = page(client)
    assert "data-tokens>1,234,567<" in html
    assert 'data-run-status="queued">Queued<' in html
    assert '<time datetime="2026-01-01T10:00:00Z" data-local="minutes">' in html
    assert "Times are UTC" not in html
