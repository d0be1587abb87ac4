"""What an agent stored never makes a page answer 500: arguments and results holding text of
5,000 nested brackets, nested deeper than a page shows, or stored 5,000 levels deep (deeper
than Python's JSON parser follows), render bounded and escaped on the
inbox (page, fragment, filtered views, a card's context) and the run page; and the fork a card
or a run page names comes from the server's record, never from the run's client-written
metadata (issue 29 item 4)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from agentops.json_view import (
    COPY_BUTTON,
    JSON_TREE_MAX_CHARS,
    JSON_TREE_MAX_DEPTH,
    PRETTY_JSON_MAX_CHARS,
)
from projects.models import Project
from runs.models import Run, Step
from tests.pages.conftest import CALCULATE, SEND_EMAIL
from testsupport.factories import make_run, plan_run

pytestmark = pytest.mark.django_db

BRACKETS = "[" * 5000 + "]" * 5000


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def nested(depth: int) -> Any:
    """Lists ``depth`` levels deep around ``"<b>leaf</b>"`` (the deepest Django's JSON encoder
    can store is about 990)."""
    value: Any = "<b>leaf</b>"
    for _ in range(depth):
        value = [value]
    return value


def render_all(client: Client, run: Run) -> list[str]:
    """The HTML of the inbox (page, fragment, each filtered: all four list the run's card),
    the card's context, the request's own page and the run page, each asserted to answer
    200."""
    approval = run.approvals.get()
    paths = [
        reverse("approval-inbox"),
        reverse("approval-inbox-fragment"),
        f"{reverse('approval-inbox')}?tool={approval.step.tool}&risk={approval.risk}",
        f"{reverse('approval-inbox-fragment')}?run={run.pk}&q=send",
        reverse("approval-context", args=[approval.pk]),
        reverse("approval-detail", args=[approval.pk]),
        reverse("run-detail", args=[run.pk]),
    ]
    shown = []
    for path in paths:
        response = client.get(path)
        assert response.status_code == 200, path
        shown.append(response.content.decode())
    for inbox in shown[:4]:
        assert f'data-approval-id="{approval.pk}"' in inbox
    return shown


def test_text_of_5000_nested_brackets_renders_on_every_page(reviewer, make_run):
    run = make_run([{"tool": "echo", "args": {"value": "x"}}, SEND_EMAIL])
    Step.objects.filter(run=run, index=0).update(result={"text": BRACKETS})
    Step.objects.filter(run=run, index=1).update(
        args={"to": ["ops@example.com"], "subject": BRACKETS, "body": "<script>x</script>"}
    )
    shown = render_all(client_for(reviewer), run)
    assert not any("<script>x</script>" in html for html in shown)
    inbox, context = shown[0], shown[4]
    # Shown as the text it is (not parsed), escaped.
    assert (
        f'<span class="j-key">subject</span>: {COPY_BUTTON}<span class="j-str">"{BRACKETS}"'
        in inbox
    )
    assert "&lt;script&gt;x&lt;/script&gt;" in inbox
    assert (
        f'<span class="j-key">text</span>: {COPY_BUTTON}<span class="j-str">"{BRACKETS}"' in context
    )


def test_arguments_and_results_nested_900_deep_render_folded_with_a_note(reviewer, make_run):
    run = make_run([{"tool": "echo", "args": {"value": "x"}}, SEND_EMAIL])
    Step.objects.filter(run=run, index=0).update(result=nested(900))
    Step.objects.filter(run=run, index=1).update(
        args={"to": ["ops@example.com"], "subject": "s", "body": nested(900)}
    )
    shown = render_all(client_for(reviewer), run)
    assert not any("<b>leaf</b>" in html for html in shown)
    note = f"nested deeper than {JSON_TREE_MAX_DEPTH} levels: not shown"
    assert note in shown[0]  # the inbox: the arguments
    assert note in shown[4]  # the card's context: the earlier result
    # The run page shows them in the same viewer, bounded alike.
    assert note in shown[-1]


def test_arguments_and_results_stored_5000_deep_render_cut_with_a_note(reviewer, make_run):
    # Only SQL past the services can store this (they refuse input deeper than 64 levels),
    # and Python's JSON parser gives up near 1,000 levels.
    run = make_run([{"tool": "echo", "args": {"value": "x"}}, SEND_EMAIL])
    deep = '{"k": ' * 5000 + '"<b>leaf</b>"' + "}" * 5000
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_step SET args = %s::jsonb, result = %s::jsonb WHERE run_id = %s",
            [deep, deep, run.pk],
        )
    shown = render_all(client_for(reviewer), run)
    assert not any("<b>leaf</b>" in html for html in shown)
    note = f"nested deeper than {JSON_TREE_MAX_DEPTH} levels: not shown"
    assert note in shown[0]
    assert note in shown[4]
    # Cut at 64 levels as it was read, then at JSON_TREE_MAX_DEPTH as it is shown.
    assert note in shown[-1]


def test_a_long_result_is_cut_on_the_run_page_and_long_arguments_stay_whole_in_the_editor(
    reviewer, make_run
):
    run = make_run([{"tool": "echo", "args": {"value": "x"}}, SEND_EMAIL])
    long = "<" * (PRETTY_JSON_MAX_CHARS + 10)
    Step.objects.filter(run=run, index=0).update(result={"text": long})
    Step.objects.filter(run=run, index=1).update(
        args={"to": ["ops@example.com"], "subject": long, "body": "b"}
    )
    shown = render_all(client_for(reviewer), run)
    run_page, inbox = shown[-1], shown[0]
    start = run_page.index("data-step-result")
    result = run_page[start : run_page.index("</div></div>", start)]
    assert "&lt;" * JSON_TREE_MAX_CHARS in result
    assert "&lt;" * (JSON_TREE_MAX_CHARS + 1) not in result
    assert f"… {len(long) - JSON_TREE_MAX_CHARS} more characters" in result
    # The form that edits the arguments gets them whole.
    editor = inbox[inbox.index("data-approval-args-editor") :]
    assert "&lt;" * (PRETTY_JSON_MAX_CHARS + 10) in editor


@pytest.mark.parametrize(
    "forged",
    [
        {"run": "not-a-uuid", "index": 0},
        {"run": ["x"], "index": {"a": 1}},
        "../../admin/",
        {"index": 0},
    ],
)
def test_a_forged_fork_in_metadata_shows_no_fork(
    reviewer, operator, django_capture_on_commit_callbacks, forged
):
    with django_capture_on_commit_callbacks(execute=True):
        run = _run_with_metadata(operator, {"forked_from": forged})
    run = Run.objects.get(pk=run.pk)
    assert run.metadata["forked_from"] == forged  # kept as the client wrote it
    _assert_no_fork_shown(reviewer, run)


def test_another_projects_run_named_in_metadata_shows_no_fork(
    reviewer, operator, django_capture_on_commit_callbacks
):
    elsewhere = Project.objects.create(slug="elsewhere", name="Elsewhere")
    other = plan_run(
        operator, [CALCULATE], capture=django_capture_on_commit_callbacks, project=elsewhere
    )
    forged = {"forked_from": {"run": str(other.pk), "index": 0}}
    with django_capture_on_commit_callbacks(execute=True):
        run = _run_with_metadata(operator, forged)
    html = _assert_no_fork_shown(reviewer, run)
    assert str(other.pk) not in html
    assert Run.objects.get(pk=run.pk).forked_from_id is None


def _run_with_metadata(operator: Any, metadata: dict[str, Any]) -> Run:
    """A plan run whose client wrote ``metadata``, its send_email step #0 awaiting approval."""
    return make_run(operator, goal="forged fork", steps=[SEND_EMAIL], metadata=metadata)


def _assert_no_fork_shown(reviewer: Any, run: Run) -> str:
    html = "".join(render_all(client_for(reviewer), run))
    assert "data-forked-from" not in html
    assert "data-run-parent" not in html
    assert "fork of" not in html
    return html
