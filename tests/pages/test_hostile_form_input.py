"""The pages' forms refuse text PostgreSQL cannot store or that is too long (NUL, an unpaired
surrogate inside JSON arguments, a 1e999, an over-long reason or comment) with a message
saying why, never a 500, and change nothing."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tests.pages.conftest import CALCULATE
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize(
    ("reason", "words"),
    [("stop\x00now", "NUL"), ("x" * 1001, "1000 characters")],
)
def test_a_cancel_reason_it_cannot_keep_is_a_message(operator, awaiting_run, reason, words):
    client = client_for(operator)  # signing in is audited: before the block
    with assert_unchanged():
        response = client.post(
            reverse("run-cancel", args=[awaiting_run.pk]), {"reason": reason}, follow=True
        )
    assert response.status_code == 200
    assert words in response.content.decode()


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"decision": "reject", "comment": "no\x00"}, "NUL"),
        ({"decision": "reject", "comment": "x" * 5001}, "5000 characters"),
        ({"decision": "approve", "args": '{"to": ["a\\u0000@example.com"]}'}, "NUL"),
        ({"decision": "approve", "args": '{"subject": "\\ud800"}'}, "surrogates"),
        ({"decision": "approve", "args": '{"subject": 1e999}'}, "finite"),
    ],
)
def test_a_decision_it_cannot_keep_is_a_message(reviewer, awaiting_run, data, words):
    approval = awaiting_run.approvals.get()
    client = client_for(reviewer)
    with assert_unchanged():
        response = client.post(reverse("approval-decide", args=[approval.pk]), data, follow=True)
    assert response.status_code == 200
    assert words in response.content.decode()


@pytest.mark.parametrize(
    ("args", "words"),
    [('{"expression": "1\\u0000"}', "NUL"), ('{"expression": "\\udfff"}', "surrogates")],
)
def test_fork_arguments_it_cannot_keep_are_a_message(operator, make_run, args, words):
    run = make_run([CALCULATE])
    client = client_for(operator)
    with assert_unchanged():
        response = client.post(
            reverse("run-fork", args=[run.pk]), {"from_index": 0, "args": args}, follow=True
        )
    assert response.status_code == 200
    assert words in response.content.decode()
