"""Compaction: older messages replaced in a run's active context by a summary (the client's,
or the server summarizer's), automatically past the token threshold, audited, the originals
kept, and a fork from before it gets them back (``runs.control.compaction``)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from agentops.actors import Actor
from agentops.errors import Conflict, InvalidInput
from audit.models import AuditEvent
from runs.context_selectors import active_context
from runs.control.compaction import load_summarizer, run_compact
from runs.control.conversation import run_messages_append
from runs.control.create import step_append
from runs.control.fork import run_fork
from runs.control.lifecycle import run_cancel
from runs.models import Compaction, Message, Run
from runs.models.conversation import estimate_tokens
from runs.selectors import run_conversation
from runs.summarizers import Summary
from tests.api.conftest import run_url, token_client
from testsupport.factories import make_run
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

TEXTS = [f"message number {i}" for i in range(10)]
MESSAGES = [{"role": "user", "content": text} for text in TEXTS]
EACH = estimate_tokens(MESSAGES[0])


@pytest.fixture
def actor(operator) -> Actor:
    return Actor.for_user(operator, via_api=True)


@pytest.fixture
def talked(operator, actor, django_capture_on_commit_callbacks) -> Run:
    """A client run with the ten ``MESSAGES`` (positions 0 to 9)."""
    capture = django_capture_on_commit_callbacks
    run = make_run(operator, agent="client", goal="talk", capture=capture, via_api=True)
    run_messages_append(actor=actor, run_id=run.pk, messages=MESSAGES)
    return run


def contents(run_id) -> list[str]:
    return [entry.message["content"] for entry in active_context(run_id=run_id).entries]


def test_a_client_summary_replaces_its_range_and_keeps_the_originals(talked, actor):
    made = run_compact(actor=actor, run_id=talked.pk, summary="2 to 6 in short", first=2, last=6)
    assert contents(talked.pk) == [*TEXTS[:2], "2 to 6 in short", *TEXTS[7:]]
    context = active_context(run_id=talked.pk)
    summary = estimate_tokens({"content": "2 to 6 in short"})
    assert context.tokens == 5 * EACH + summary
    assert context.entries[2].message == {"role": "system", "content": "2 to 6 in short"}
    assert Run.objects.get(pk=talked.pk).context_tokens == context.tokens
    assert (made.tokens_before, made.tokens_after) == (10 * EACH, 5 * EACH + summary)
    assert made.summarizer == "client"
    # The originals are kept.
    assert run_conversation(run_id=talked.pk) == MESSAGES


def test_each_compaction_is_an_audit_event_on_the_timeline(talked, actor, client, operator):
    made = run_compact(actor=actor, run_id=talked.pk, summary="short", first=1, last=3)
    event = AuditEvent.objects.get(run_id=talked.pk, verb="run.compacted")
    assert event.payload == {
        "compaction": made.pk,
        "first": 1,
        "last": 3,
        "tokens_before": 10 * EACH,
        "tokens_after": 7 * EACH + estimate_tokens({"content": "short"}),
        "summarizer": "client",
        "summarizer_version": "",
        "trigger": "request",
        "replaced": [],
    }
    assert event.actor_name == "olivia"
    client.force_login(operator)
    assert "run.compacted" in client.get(f"/runs/{talked.pk}/").content.decode()


def test_the_server_summarizer_keeps_the_first_message_and_the_last_k(talked, actor, settings):
    settings.AGENTOPS_CONTEXT_KEEP_LAST = 3
    made = run_compact(actor=actor, run_id=talked.pk)
    assert (made.first, made.last) == (1, 6)
    assert made.summarizer == "runs.summarizers.keep_first_and_last"
    assert made.summarizer_version == "1"
    shown = contents(talked.pk)
    assert shown[0] == TEXTS[0]
    assert "6 earlier messages (positions 1 to 6)" in shown[1]
    assert shown[2:] == TEXTS[7:]


def test_a_later_compaction_covering_an_earlier_one_replaces_it(talked, actor):
    first = run_compact(actor=actor, run_id=talked.pk, summary="a", first=2, last=4)
    second = run_compact(actor=actor, run_id=talked.pk, summary="b", first=1, last=6)
    assert contents(talked.pk) == [TEXTS[0], "b", *TEXTS[7:]]
    assert second.tokens_before == first.tokens_after
    context = active_context(run_id=talked.pk)
    assert [c.pk for c in context.compactions] == [second.pk]
    assert Run.objects.get(pk=talked.pk).context_tokens == context.tokens


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"summary": "s", "first": 5, "last": 4}, "first <= last"),
        ({"summary": "s", "first": 0, "last": 10}, "first <= last"),
        ({"summary": "s", "first": -1, "last": 2}, "first must be"),
        ({"summary": "s", "first": True, "last": 2}, "first must be"),
        ({"summary": "s", "first": 3, "last": 8}, "cut the compaction"),
        ({"summary": "s", "first": 1}, "last must be"),
        ({"summary": "  ", "first": 0, "last": 1}, "summary must be"),
        ({"summary": 5, "first": 0, "last": 1}, "summary must be"),
        ({"first": 0, "last": 1}, "come with a summary"),
    ],
)
def test_a_bad_range_or_summary_is_refused_and_changes_nothing(talked, actor, body, words):
    run_compact(actor=actor, run_id=talked.pk, summary="kept", first=1, last=4)
    with assert_unchanged(), pytest.raises(InvalidInput, match=words):
        run_compact(actor=actor, run_id=talked.pk, **body)
    assert Compaction.objects.filter(run=talked).count() == 1


def test_nothing_to_summarize_or_a_finished_run_is_a_conflict(actor, talked, settings):
    settings.AGENTOPS_CONTEXT_KEEP_LAST = 8
    with assert_unchanged(), pytest.raises(Conflict, match="nothing to compact"):
        run_compact(actor=actor, run_id=talked.pk)
    run_cancel(run_id=talked.pk, actor=actor)
    with assert_unchanged(), pytest.raises(Conflict, match="cancelled"):
        run_compact(actor=actor, run_id=talked.pk, summary="late", first=0, last=1)


def test_past_the_threshold_an_append_compacts_the_context(
    talked, actor, settings, django_capture_on_commit_callbacks
):
    settings.AGENTOPS_CONTEXT_TOKEN_THRESHOLD = 12 * EACH
    settings.AGENTOPS_CONTEXT_KEEP_LAST = 2
    more = [{"role": "user", "content": "message number X"}]
    with django_capture_on_commit_callbacks(execute=True):
        run_messages_append(actor=actor, run_id=talked.pk, messages=more * 2)
    assert not Compaction.objects.filter(run=talked).exists()  # 12 messages: not past it
    with django_capture_on_commit_callbacks(execute=True):
        run_messages_append(actor=actor, run_id=talked.pk, messages=more)
    made = Compaction.objects.get(run=talked)
    assert (made.first, made.last) == (1, 10)
    assert made.tokens_before == 13 * EACH
    assert Run.objects.get(pk=talked.pk).context_tokens == made.tokens_after < 12 * EACH
    event = AuditEvent.objects.get(run_id=talked.pk, verb="run.compacted")
    assert (event.payload["trigger"], event.actor_name) == ("threshold", "compaction")
    assert Message.objects.filter(run=talked).count() == 13


def test_a_fork_from_before_a_compaction_gets_the_originals_back(
    talked, actor, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        step_append(actor=actor, run_id=talked.pk, tool="calculate", args={"expression": "1"})
    run_messages_append(actor=actor, run_id=talked.pk, messages=[{"role": "user", "content": "z"}])
    early = run_compact(actor=actor, run_id=talked.pk, summary="early", first=1, last=2)
    with django_capture_on_commit_callbacks(execute=True):
        step_append(actor=actor, run_id=talked.pk, tool="calculate", args={"expression": "2"})
    run_compact(actor=actor, run_id=talked.pk, summary="late", first=3, last=9)

    with django_capture_on_commit_callbacks(execute=True):
        before_both = run_fork(run_id=talked.pk, actor=actor, from_index=0)
        between = run_fork(run_id=talked.pk, actor=actor, from_index=1)

    # From step 0: the messages appended before it, none replaced.
    assert contents(before_both.pk) == TEXTS
    assert not before_both.compactions.exists()
    assert Run.objects.get(pk=before_both.pk).context_tokens == 10 * EACH
    # From step 1: every message so far and the compaction made before step 1 existed.
    assert contents(between.pk) == [TEXTS[0], "early", *TEXTS[3:], "z"]
    assert list(between.compactions.values_list("summary", flat=True)) == [early.summary]
    assert Run.objects.get(pk=between.pk).context_tokens == active_context(run_id=between.pk).tokens


def test_the_api_compacts_and_shows_the_context(talked, operator, settings):
    settings.AGENTOPS_CONTEXT_KEEP_LAST = 4
    api = token_client(operator)
    response = api.post(
        run_url(talked.pk, "compact"), {"summary": "gist", "first": 0, "last": 1}, format="json"
    )
    assert response.status_code == 201, response.content
    assert (response.json()["first"], response.json()["last"]) == (0, 1)
    served = api.post(run_url(talked.pk, "compact"), {}, format="json")
    assert served.status_code == 201, served.content
    assert (served.json()["first"], served.json()["last"]) == (2, 5)
    context = api.get(run_url(talked.pk, "context")).json()
    assert [m["content"] for m in context["messages"][2:]] == TEXTS[6:]
    assert context["messages"][0] == {"role": "system", "content": "gist"}
    assert context["tokens"] == active_context(run_id=talked.pk).tokens
    assert [c["summary"] for c in context["compactions"]] == ["gist", served.json()["summary"]]
    with assert_unchanged():
        refused = api.post(
            run_url(talked.pk, "compact"), {"summary": "x", "first": 1, "last": 3}, format="json"
        )
    assert refused.status_code == 400
    assert refused.json()["field"] == "first"


def test_a_summarizer_hook_from_settings_is_used(talked, actor, settings):
    settings.AGENTOPS_SUMMARIZER = "tests.runs.test_compaction.summarize_all_but_the_last"
    made = run_compact(actor=actor, run_id=talked.pk)
    assert (made.first, made.last, made.summary) == (0, 8, "everything but the last")
    assert (made.summarizer, made.summarizer_version) == (settings.AGENTOPS_SUMMARIZER, "")


def summarize_all_but_the_last(entries):
    """A summarizer hook (no ``version``): everything but the last entry."""
    return Summary(entries[0].first, entries[-2].last, "everything but the last")


@pytest.mark.parametrize(
    "path", ["runs.summarizers.nothing_here", "runs.control.compaction.CLIENT"]
)
def test_a_summarizer_setting_naming_no_callable_is_a_configuration_error(settings, path):
    settings.AGENTOPS_SUMMARIZER = path
    with pytest.raises(ImproperlyConfigured, match="AGENTOPS_SUMMARIZER"):
        load_summarizer()
