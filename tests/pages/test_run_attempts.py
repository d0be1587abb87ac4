"""A run page's "Attempts" sections: a step's attempts are counted on the page and listed
when the section is opened (``run-step-attempts``), except a failed step's, listed at once in a
section that opens with the page; each attempt reads the same either way."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

import tests.tools  # noqa: F401  (registers the test tools)
from runs.models import Step, StepStatus
from tests.pages.conftest import CALCULATE
from testsupport.factories import make_user
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

CRASH = {"tool": "test_crash", "args": {}}


def _section(html: str, index: int) -> str:
    """The markup of step ``index``'s "Attempts" section."""
    found = re.search(
        rf'<details class="attempts"[^>]*id="attempts-{index}">.*?</details>', html, re.S
    )
    assert found, f"no attempts section for step {index}"
    return found.group(0)


def _rows(html: str) -> list[str]:
    """The text of each attempt row (tags dropped, spaces squeezed)."""
    rows = re.findall(r"<tr>\s*<td>.*?</tr>", html, re.S)
    return [" ".join(re.sub(r"<[^>]+>", " ", row).split()) for row in rows]


def test_a_succeeded_steps_attempts_are_counted_and_loaded_when_opened(client, operator, make_run):
    run = make_run([CALCULATE])
    client.force_login(operator)
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    section = _section(page, 0)
    path = reverse("run-step-attempts", args=[run.pk, 0])
    assert "<summary>Attempts (1)</summary>" in section
    assert f'data-lazy-src="{path}"' in section
    assert " open" not in section.split(">")[0]
    assert "<table" not in section
    fragment = client.get(path)
    assert fragment.status_code == 200
    (row,) = _rows(fragment.content.decode())
    assert row.startswith("1 Succeeded ")


def test_a_failed_steps_attempts_are_listed_in_an_open_section(client, operator, make_run):
    run = make_run([CRASH])
    assert Step.objects.get(run=run).status == StepStatus.FAILED
    client.force_login(operator)
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    section = _section(page, 0)
    assert "<summary>Attempts (2)</summary>" in section
    assert section.startswith('<details class="attempts" open')
    assert "data-lazy-src" not in section
    inline = _rows(section)
    assert [row.split()[:2] for row in inline] == [["1", "Failed"], ["2", "Failed"]]
    assert all("ValueError : boom" in row for row in inline)
    loaded = client.get(reverse("run-step-attempts", args=[run.pk, 0])).content.decode()
    assert _rows(loaded) == inline


def test_a_step_without_attempts_has_no_section_and_an_unknown_step_is_not_found(
    client, operator, make_run
):
    run = make_run([CRASH, CALCULATE])
    client.force_login(operator)
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'id="attempts-1"' not in page
    pending = client.get(reverse("run-step-attempts", args=[run.pk, 1]))
    assert pending.status_code == 200
    assert "No attempts yet." in pending.content.decode()
    assert client.get(reverse("run-step-attempts", args=[run.pk, 2])).status_code == 404


def test_a_non_member_cannot_read_a_runs_attempts(client, make_run):
    run = make_run([CALCULATE])
    client.force_login(make_user("mallory"))
    with assert_unchanged():
        response = client.get(reverse("run-step-attempts", args=[run.pk, 0]))
    assert response.status_code in (403, 404)
    assert "succeeded" not in response.content.decode()


def test_the_run_page_reads_no_attempt_rows_for_steps_that_did_not_fail(client, operator, make_run):
    run = make_run([CALCULATE] * 3)
    client.force_login(operator)
    with CaptureQueriesContext(connection) as captured:
        assert client.get(reverse("run-detail", args=[run.pk])).status_code == 200
    # Only their number (a subquery of the steps' query), no attempt's columns.
    assert not any('"runs_stepattempt"."worker"' in q["sql"] for q in captured.captured_queries)
