"""The evals pages' forms: creating a case set, and a case per run of a filter; refused input
is said on the page and changes nothing; a viewer may read but not make."""

from __future__ import annotations

import pytest
from django.test import Client

from agentops.actors import Actor
from evals.models import CaseSet
from evals.services import case_checked, case_set_create, cases_add, eval_run_record
from projects.models import Project
from projects.roles import Role
from projects.services import project_default
from testsupport.factories import make_user

pytestmark = pytest.mark.django_db


def _browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_operator_creates_a_case_set_and_a_viewer_may_not(operator):
    slug = project_default().slug
    page = _browser(operator)
    answer = page.post("/evals/", {"name": "refunds", "project": slug})
    case_set = CaseSet.objects.get()
    assert answer.status_code == 302
    assert answer["Location"] == f"/evals/case-sets/{case_set.pk}/"
    refused = page.post("/evals/", {"name": "refunds", "project": slug}, follow=True)
    assert "exists already" in refused.content.decode()
    viewer = _browser(make_user("vera", Role.VIEWER))
    refused = viewer.post("/evals/", {"name": "mine", "project": slug}, follow=True)
    assert "choose a project where you may make cases" in refused.content.decode()
    assert list(CaseSet.objects.values_list("name", flat=True)) == ["refunds"]
    assert "refunds" in viewer.get("/evals/").content.decode()


def test_bulk_cases_from_the_case_set_page(operator, rejected_run):
    run = rejected_run("no")
    case_set = case_set_create(
        project_id=project_default().pk, name="weekly", actor=Actor.for_user(operator)
    )
    url = f"/evals/case-sets/{case_set.pk}/bulk/"
    page = _browser(operator)
    refused = page.post(url, {"status": ["finished"]}, follow=True)
    assert "statuses are among" in refused.content.decode()
    viewer = _browser(make_user("vera", Role.VIEWER))
    assert viewer.post(url, {"status": ["failed"]}).status_code == 403
    case_set.refresh_from_db()
    assert case_set.version == 0

    done = page.post(url, {"status": ["failed"], "since": "2020-01-01"}, follow=True)
    assert "1 case(s) added." in done.content.decode()
    case = case_set.cases.get()
    assert (case.source_run_id, case.expected["kind"]) == (run.pk, "must_not")
    later = page.post(url, {"status": ["failed"], "since": "2999-01-01"}, follow=True)
    assert "0 case(s) added." in later.content.decode()
    assert case_set.cases.count() == 1


def test_admin_lists_only_the_case_sets_of_the_staff_users_projects(operator):
    case_set_create(
        project_id=project_default().pk, name="refund-regressions", actor=Actor.for_user(operator)
    )
    other = Project.objects.create(slug="other", name="Other")
    outsider = make_user("oscar", Role.ADMIN, project=other)
    outsider.is_staff = True
    outsider.save(update_fields=["is_staff"])
    case_set_create(project_id=other.pk, name="theirs", actor=Actor.for_user(outsider))
    page = _browser(outsider).get("/admin/evals/caseset/")
    assert page.status_code == 200
    listed = page.content.decode()
    assert "theirs" in listed
    assert "refund-regressions" not in listed
    ours = CaseSet.objects.get(name="refund-regressions")
    assert _browser(outsider).get(f"/admin/evals/caseset/{ours.pk}/change/").status_code in (
        302,
        404,
    )


def test_pages_show_agent_written_values_as_text_and_refuse_comparing_two_sets(operator):
    actor = Actor.for_user(operator)
    hostile = "<script>alert(1)</script>"
    runs = []
    for name in ("first", "second"):
        case_set = case_set_create(project_id=project_default().pk, name=name, actor=actor)
        case = cases_add(
            case_set_id=case_set.pk,
            cases=[
                case_checked(
                    {
                        "name": hostile,
                        "conversation": [],
                        "expected": {"kind": "calls", "calls": [{"tool": "t", "args": {}}]},
                    }
                )
            ],
            actor=actor,
        )[0]
        call = {"tool": hostile, "args": {"x": hostile, "deep": [[[{"y": None}]]]}}
        outcome = {"case": case.pk, "calls": [call], "final": hostile, "error": ""}
        runs.append(
            eval_run_record(
                case_set_id=case_set.pk,
                version=None,
                agent_version=hostile,
                outcomes=[outcome],
                actor=actor,
            )
        )
    page = _browser(operator)
    shown = page.get(f"/evals/runs/{runs[0].pk}/")
    assert shown.status_code == 200
    assert hostile not in shown.content.decode()
    assert "&lt;script&gt;" in shown.content.decode()
    refused = page.get(f"/evals/compare/?first={runs[0].pk}&second={runs[1].pk}", follow=True)
    assert "different case sets" in refused.content.decode()
    assert page.get("/evals/compare/?first=x&second=1").status_code == 404
