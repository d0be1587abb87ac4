"""What an approval card shows: the conversation up to the call only, why the call waits
(the matched rule; a fork's edited arguments), readable JSON, the tool's preview, who may not
decide and why, and decisions in plain words."""

import json
import logging
from dataclasses import replace

import pytest
from django.test import Client
from django.urls import reverse

from agentops.actors import Actor
from agentops.json_view import COPY_BUTTON
from approvals.models import RiskRule
from approvals.risk import rules_changed
from runs.control.create import run_create
from runs.control.fork import run_fork
from runs.models import Run
from runs.tools import registry
from testsupport.factories import make_user

pytestmark = pytest.mark.django_db

BEFORE_CALL = "Please mail the refund note to ops."
AFTER_CALL = "Thanks, that is all for today."
TRANSCRIPT = [
    {"role": "system", "content": "You are the support agent."},
    {"role": "user", "content": BEFORE_CALL},
    {
        "role": "assistant",
        "content": "I will send the note now.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "send_email",
                    "arguments": json.dumps(
                        {"to": ["ops@example.com"], "subject": "refund", "body": "done"}
                    ),
                },
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"sent": 1, "id": "m-77"}'},
    {"role": "user", "content": AFTER_CALL},
    {"role": "assistant", "content": "Goodbye!"},
]


def inbox(user, query: str = "") -> str:
    client = Client()
    client.force_login(user)
    response = client.get(f"/approvals/{query}")
    assert response.status_code == 200
    return response.content.decode()


def card_of(page: str, approval_id: int) -> str:
    start = page.index(f'data-approval-id="{approval_id}"')
    end = page.find("data-approval-id=", start + 1)
    return page[start : end if end > 0 else len(page)]


def card_context(user, approval_id: int) -> str:
    """The card's context fragment (goal, conversation, earlier results) as ``user`` sees it."""
    client = Client()
    client.force_login(user)
    response = client.get(reverse("approval-context", args=[approval_id]))
    assert response.status_code == 200
    return response.content.decode()


def test_a_transcript_card_shows_the_conversation_up_to_the_call_only(
    operator, reviewer, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(
            actor=Actor.for_user(operator), agent="transcript", goal="refund", transcript=TRANSCRIPT
        )
    approval = Run.objects.get(pk=run.pk).approvals.get()
    card = card_of(inbox(reviewer), approval.pk)
    context = card_context(reviewer, approval.pk)
    conversation = context[context.index("data-approval-conversation") :]
    assert BEFORE_CALL in conversation
    assert "I will send the note now." in conversation
    for shown in (card, context):
        assert AFTER_CALL not in shown
        assert "Goodbye!" not in shown


def test_the_card_says_which_rule_made_the_call_wait(reviewer, awaiting_run):
    RiskRule.objects.filter(pattern="send_*").update(required_approvals=2)
    rules_changed()  # an update around the ORM's signals
    approval = awaiting_run.approvals.get()
    card = card_of(inbox(reviewer), approval.pk)
    reason = card[card.index("data-approval-reason") :]
    assert "Why it waits" in reason
    assert approval.rule.reason == "rule send_*: high risk"
    assert "rule send_*: high risk" in reason


def test_a_forked_runs_low_risk_card_says_its_arguments_were_edited(
    operator, reviewer, make_run, django_capture_on_commit_callbacks
):
    source = make_run([{"tool": "calculate", "args": {"expression": "1"}}] * 2)
    with django_capture_on_commit_callbacks(execute=True):
        fork = run_fork(
            run_id=source.pk,
            actor=Actor.for_user(operator),
            from_index=1,
            args={"expression": "9*9"},
        )
    approval = fork.approvals.get()
    assert approval.risk == "low"
    card = card_of(inbox(reviewer), approval.pk)
    assert "low risk" in card
    assert "arguments edited by a person" in card
    assert f'fork of <a href="/runs/{source.pk}/">' in card
    assert "made by olivia" in card


def test_arguments_and_results_holding_json_text_are_shown_parsed(reviewer, make_run):
    nested = json.dumps({"name": "<b>Ada</b>", "tags": ["x"]})
    run = make_run(
        [
            {"tool": "echo", "args": {"value": nested}},
            {
                "tool": "send_email",
                "args": {"to": ["ops@example.com"], "subject": nested, "body": "b"},
            },
        ]
    )
    approval = run.approvals.get()
    card = card_of(inbox(reviewer), approval.pk)
    context = card_context(reviewer, approval.pk)
    shown = card[card.index("data-approval-args") : card.index("data-approval-preview")]
    shown += context[context.index("earlier-steps") :]
    assert "\\&quot;" not in shown
    # The argument to decide, and the earlier step's argument beside its result.
    assert (
        shown.count(
            f'<span class="j-key">name</span>: {COPY_BUTTON}<span class="j-str">"&lt;b&gt;Ada'
        )
        == 3
    )
    assert "<b>Ada</b>" not in card + context
    assert shown.count('class="j-note j-json"') == 3


def test_the_card_shows_the_tools_preview_of_what_changes(reviewer, awaiting_run):
    card = card_of(inbox(reviewer), awaiting_run.approvals.get().pk)
    changes = card[card.index("data-approval-preview") :]
    assert "sends one email to 1 recipient(s); it cannot be recalled" in changes
    assert "ops@example.com" in changes


def test_a_preview_that_raises_shows_no_preview_and_is_logged(
    reviewer, awaiting_run, monkeypatch, caplog
):
    def broken(args, ctx):
        raise RuntimeError("mail server unreachable")

    tool = registry.get_tool("send_email")
    monkeypatch.setitem(registry._REGISTRY, "send_email", replace(tool, preview=broken))
    with caplog.at_level(logging.ERROR, logger="runs.tools.preview"):
        card = card_of(inbox(reviewer), awaiting_run.approvals.get().pk)
    assert "No preview: the tool\N{RIGHT SINGLE QUOTATION MARK}s preview failed" in card
    assert 'data-action="approve"' in card
    assert "preview of send_email failed" in caplog.text
    assert "mail server unreachable" in caplog.text


def test_an_operator_sees_why_they_may_not_decide_instead_of_buttons(operator, awaiting_run):
    card = card_of(inbox(operator), awaiting_run.approvals.get().pk)
    assert "Your role in project Default is operator: only its reviewers may decide." in card
    assert 'data-action="approve"' not in card
    assert 'data-action="reject"' not in card


def test_the_requester_sees_the_four_eyes_rule_instead_of_buttons(operator, awaiting_run):
    from projects.services import membership_set, project_default

    membership_set(project=project_default(), user=operator, role="admin")
    card = card_of(inbox(operator), awaiting_run.approvals.get().pk)
    assert "You requested this run: four-eyes rule" in card
    assert 'data-action="approve"' not in card


def test_decisions_read_approved_and_rejected(
    reviewer, second_reviewer, make_run, django_capture_on_commit_callbacks
):
    from approvals.services import approval_decide

    RiskRule.objects.filter(pattern="send_*").update(required_approvals=2)

    rules_changed()  # an update around the ORM's signals
    run = make_run(
        [{"tool": "send_email", "args": {"to": ["a@b.co"], "subject": "s", "body": "b"}}]
    )
    approval = run.approvals.get()
    approval_decide(
        approval_id=approval.pk, actor=Actor.for_user(reviewer), decision="approve", comment="ok"
    )
    card = card_of(inbox(second_reviewer), approval.pk)
    assert "rita approved: “ok”" in card
    assert "You approved this already" in card_of(inbox(reviewer), approval.pk)
    approval_decide(
        approval_id=approval.pk,
        actor=Actor.for_user(second_reviewer),
        decision="reject",
        comment="wrong address",
    )
    client = Client()
    client.force_login(reviewer)
    run_page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "ravi rejected: “wrong address”" in run_page
    assert "rejectd" not in run_page


def test_the_navigation_shows_the_pending_count_to_who_may_see_approvals(reviewer, awaiting_run):
    client = Client()
    client.force_login(reviewer)
    page = client.get("/").content.decode()
    assert 'data-pending-badge aria-label="1 pending">1</span>' in page
    assert "<title>(1) Approvals · agentops</title>" in inbox(reviewer)
    outsider = make_user("otto")
    client.force_login(outsider)
    assert "data-pending-badge" not in client.get("/").content.decode()
