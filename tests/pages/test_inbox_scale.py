"""The inbox stays cheap however many requests are pending and however long their runs are."""

import pytest
from django.test import Client

from approvals.models import ApprovalRequest
from testsupport.factories import make_run

pytestmark = pytest.mark.django_db

MAIL = {"tool": "send_email", "args": {"to": ["a@example.com"], "subject": "s", "body": "b"}}


def waiting_runs(operator, capture, *, count: int, earlier: int) -> None:
    steps = [{"tool": "echo", "args": {"value": i}} for i in range(earlier)] + [MAIL]
    with capture(execute=True):
        for _ in range(count):
            make_run(operator, goal="g", steps=steps)


def test_the_inbox_shows_the_last_ten_earlier_results(
    operator, reviewer, django_capture_on_commit_callbacks
):
    waiting_runs(operator, django_capture_on_commit_callbacks, count=1, earlier=14)
    client = Client()
    client.force_login(reviewer)
    approval = ApprovalRequest.objects.get()
    page = client.get(f"/approvals/{approval.pk}/context/").content.decode()
    assert "(the last 10 of 14)" in page
    assert '<span class="mono">#4 echo</span>' in page
    assert '<span class="mono">#3 echo</span>' not in page


def test_inbox_queries_do_not_grow_with_pending_requests(
    operator, reviewer, django_capture_on_commit_callbacks, django_assert_max_num_queries
):
    client = Client()
    client.force_login(reviewer)
    waiting_runs(operator, django_capture_on_commit_callbacks, count=2, earlier=3)
    with django_assert_max_num_queries(12) as few:
        client.get("/approvals/")
    waiting_runs(operator, django_capture_on_commit_callbacks, count=30, earlier=3)
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = client.get("/approvals/")
    assert "32 pending requests" in response.content.decode()
