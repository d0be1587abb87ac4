"""Every page is accessible (no serious or critical axe-core violation) in the light and the
dark theme, usable 390 px wide, and shows times in the viewer's time zone.

``PAGES`` lists every page of the app (``web/urls.py`` and the apps' ``urls.py``): add a new
page there. Not pages, so not listed: the live fragments (``*/fragment/``, parts of the pages
above), the POST-only actions (cancel, resume, fork, settle, decide, log out), the API and its
schema (JSON).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, BrowserContext, Page, expect

from agentops.actors import Actor
from approvals.models import ApprovalRequest
from audit.models import AuditEvent
from evals.from_runs import case_make_from_run
from evals.models import EvalRun
from evals.services import case_set_create, eval_run_record
from memory.models import MemoryItem
from memory.services import memory_put
from projects.roles import Role
from projects.services import project_default
from runs.control.create import run_create
from runs.control.sessions import session_create, session_item_pop, session_items_add
from runs.control.state import run_state_write, session_state_write
from runs.models import AgentSession, Run, RunStatus
from tests.e2e.conftest import TIMEOUT_MS, log_in
from testsupport.factories import make_user

pytestmark = [pytest.mark.long, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

EMAIL_ARGS = {"to": ["cfo@example.com"], "subject": "Q3 numbers", "body": "Total: 42"}
# axe-core impacts that fail the test.
BLOCKING = {"serious", "critical"}
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1440, "height": 900}
# The run's creation time, as stored; in Tokyo (UTC+9) it is 23:03:07 the same day.
CREATED = datetime(2026, 5, 1, 14, 3, 7, tzinfo=UTC)


@dataclass(frozen=True)
class Data:
    run: Run
    approval: ApprovalRequest
    event: AuditEvent
    session: AgentSession
    memory_item: MemoryItem
    eval_runs: tuple[EvalRun, EvalRun]


@dataclass(frozen=True)
class AppPage:
    """One page: its name, the user who opens it (None: signed out), its path given the test
    data, and whether it is one of the app's own pages (held to the 390 px rule; Django admin
    has its own layout)."""

    name: str
    user: str | None
    path: Callable[[Data], str]
    own: bool = True


PAGES = [
    AppPage("login", None, lambda d: "/accounts/login/"),
    AppPage("runs list", "olivia", lambda d: "/"),
    AppPage("runs list, filtered", "olivia", lambda d: "/?status=waiting"),
    AppPage("run page", "olivia", lambda d: f"/runs/{d.run.pk}/"),
    AppPage("sessions list", "olivia", lambda d: "/sessions/"),
    AppPage("session page", "olivia", lambda d: f"/sessions/{d.session.pk}/"),
    AppPage("memory", "olivia", lambda d: "/memory/?namespace=project&q=concise"),
    AppPage("memory item", "olivia", lambda d: f"/memory/items/{d.memory_item.pk}/"),
    AppPage("approvals inbox", "rita", lambda d: "/approvals/"),
    AppPage("approval request", "rita", lambda d: f"/approvals/{d.approval.pk}/"),
    AppPage("make a case", "olivia", lambda d: f"/runs/{d.run.pk}/case/"),
    AppPage("case sets", "olivia", lambda d: "/evals/"),
    AppPage("case set", "olivia", lambda d: f"/evals/case-sets/{d.eval_runs[0].case_set_id}/"),
    AppPage("eval run", "olivia", lambda d: f"/evals/runs/{d.eval_runs[1].pk}/"),
    AppPage(
        "eval runs compared",
        "olivia",
        lambda d: f"/evals/compare/?first={d.eval_runs[0].pk}&second={d.eval_runs[1].pk}",
    ),
    AppPage("overview", "olivia", lambda d: "/overview/"),
    AppPage("workers and queues", "olivia", lambda d: "/workers/"),
    AppPage("admin index", "ada", lambda d: "/admin/", own=False),
    AppPage("admin runs changelist", "ada", lambda d: "/admin/runs/run/", own=False),
    AppPage(
        "admin session",
        "ada",
        lambda d: f"/admin/runs/agentsession/{d.session.pk}/change/",
        own=False,
    ),
    AppPage("audit log", "ada", lambda d: "/admin/audit/auditevent/", own=False),
    AppPage("retention purges", "ada", lambda d: "/admin/runs/retentionpurge/", own=False),
    AppPage("notifications", "ada", lambda d: "/admin/approvals/notification/", own=False),
    AppPage(
        "audit event", "ada", lambda d: f"/admin/audit/auditevent/{d.event.pk}/change/", own=False
    ),
    AppPage("API docs", "olivia", lambda d: "/api/docs/", own=False),
]


@pytest.fixture
def data(seeded: None) -> Data:
    """A run with a finished step and one waiting for approval, requested by olivia, with a
    version of its agent's state, and a session; rita reviews; ada is a superuser. Tasks run
    eagerly (no worker)."""
    olivia = make_user("olivia", Role.OPERATOR)
    make_user("rita", Role.REVIEWER)
    make_user("ada", superuser=True)
    run = run_create(
        actor=Actor.for_user(olivia),
        agent="plan",
        goal="Mail the Q3 total to the CFO",
        steps=[
            {"tool": "calculate", "args": {"expression": "40+2"}, "rationale": "Add it up."},
            {"tool": "send_email", "args": EMAIL_ARGS, "rationale": "The user asked for it."},
        ],
    )
    Run.objects.filter(pk=run.pk).update(created_at=CREATED)
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.WAITING
    # The run page's "Agent state" section, and the fork form's state version, shown too.
    run_state_write(
        run_id=run.pk,
        actor=Actor.for_user(olivia),
        base_version=0,
        operation="put",
        document={"total": 42},
        rationale="Added it up.",
        step_index=0,
    )
    # A session with items of two shapes, one removed, and a state version.
    actor = Actor.for_user(olivia)
    session = session_create(
        actor=actor, project=project_default(), external_id="support-chat", subject="user-5"
    )
    session_items_add(
        actor=actor,
        session_id=session.pk,
        items=[
            {"role": "user", "content": "Where is my order?"},
            {"type": "function_call", "name": "lookup", "arguments": "{}", "call_id": "c1"},
            {"role": "assistant", "content": "It ships tomorrow."},
        ],
    )
    session_item_pop(actor=actor, session_id=session.pk)
    session_state_write(
        session_id=session.pk, actor=actor, base_version=0, operation="put", document={"a": 1}
    )
    event = AuditEvent.objects.filter(run_id=run.pk).earliest("id")
    # A memory item written twice: its page shows a change.
    for style in ("concise", "very concise"):
        item = memory_put(
            actor=actor,
            project=project_default(),
            namespace=["project", "user:5", "preferences"],
            key="tone",
            value={"style": style},
            text=f"prefers {style} technical explanations",
        ).item
    # A case of the email step, and two agent versions' eval runs of it (one regressed).
    case_set = case_set_create(project_id=project_default().pk, name="emails", actor=actor)
    case = case_make_from_run(
        case_set_id=case_set.pk, run_id=run.pk, step_index=1, expect="recorded", actor=actor
    )
    first, second = (
        eval_run_record(
            case_set_id=case_set.pk,
            version=None,
            agent_version=label,
            outcomes=[{"case": case.pk, "calls": [{"tool": "send_email", "args": args}]}],
            actor=actor,
        )
        for label, args in (("v1", EMAIL_ARGS), ("v2", {**EMAIL_ARGS, "to": ["all@example.com"]}))
    )
    return Data(run, run.approvals.get(), event, session, item, (first, second))


@pytest.fixture
def contexts(chromium: Browser, asgi_server: Any) -> Iterator[Callable[..., BrowserContext]]:
    """``contexts(**options)``: a new browser context on the test server (closed at the end)."""
    made: list[BrowserContext] = []

    def make(**options: Any) -> BrowserContext:
        context = chromium.new_context(base_url=asgi_server.url, **options)
        context.set_default_timeout(TIMEOUT_MS)
        made.append(context)
        return context

    expect.set_options(timeout=TIMEOUT_MS)
    yield make
    for context in made:
        context.close()


def open_as(context: BrowserContext, user: str | None, path: str) -> Page:
    page = context.new_page()
    if user is None:
        page.goto(path)
    else:
        log_in(page, user, path)
    page.wait_for_load_state("networkidle")
    return page


class Visitor:
    """Opens pages as their users, signing each user in once: one browser context per user
    (and one signed out), each with ``options``."""

    def __init__(self, contexts: Callable[..., BrowserContext], **options: Any) -> None:
        self.contexts, self.options = contexts, options
        self.pages: dict[str | None, Page] = {}

    def open(self, user: str | None, path: str) -> Page:
        page = self.pages.get(user)
        if page is None:
            page = self.pages[user] = open_as(self.contexts(**self.options), user, path)
            return page
        page.goto(path)
        page.wait_for_load_state("networkidle")
        return page


# In the dark theme only colours change: its pages are checked for contrast alone.
CONTRAST_ONLY = {"runOnly": {"type": "rule", "values": ["color-contrast"]}}


def blocking_violations(page: Page, options: dict[str, Any] | None = None) -> list[str]:
    results = Axe().run(page, options=options)
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in results.response["violations"]
        if v["impact"] in BLOCKING
    ]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_page_has_a_serious_accessibility_violation(data, contexts, scheme):
    found = {}
    visitor = Visitor(contexts, color_scheme=scheme, viewport={"width": 1280, "height": 900})
    for app_page in PAGES:
        page = visitor.open(app_page.user, app_page.path(data))
        violations = blocking_violations(page, CONTRAST_ONLY if scheme == "dark" else None)
        if violations:
            found[app_page.name] = violations
    assert found == {}, "\n".join(f"{k}: {v}" for k, v in found.items())


def luminance(css_color: str) -> float:
    """The relative luminance (WCAG 2) of a computed ``rgb(r, g, b)`` colour."""
    channels = [int(c) / 255 for c in css_color[css_color.index("(") + 1 : -1].split(",")[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_theme_follows_the_system_setting(data, contexts, scheme):
    page = open_as(contexts(color_scheme=scheme), "olivia", f"/runs/{data.run.pk}/")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    surface = page.evaluate("getComputedStyle(document.querySelector('.card')).backgroundColor")
    if scheme == "dark":
        assert luminance(background) < 0.05, background
        assert luminance(surface) < 0.05, surface
    else:
        assert luminance(background) > 0.8, background
        assert luminance(surface) > 0.8, surface


def test_no_page_is_wider_than_a_1440_px_window(data, contexts):
    visitor = Visitor(contexts, viewport=DESKTOP)
    for app_page in [p for p in PAGES if p.own]:
        page = visitor.open(app_page.user, app_page.path(data))
        width = page.evaluate("document.scrollingElement.scrollWidth")
        assert width <= DESKTOP["width"], f"{app_page.name} scrolls sideways: {width} px"


def test_the_pages_fit_a_phone_with_the_user_and_log_out_in_view(data, contexts):
    visitor = Visitor(contexts, viewport=PHONE)
    for app_page in [p for p in PAGES if p.own]:
        page = visitor.open(app_page.user, app_page.path(data))
        width = page.evaluate("document.scrollingElement.scrollWidth")
        assert width <= PHONE["width"], f"{app_page.name} scrolls sideways: {width} px"
        if app_page.user is not None:
            for control in (
                page.locator("[data-user]"),
                page.get_by_role("button", name="Log out"),
            ):
                expect(control).to_be_in_viewport()
                box = control.bounding_box()
                assert box is not None
                assert box["x"] + box["width"] <= PHONE["width"], app_page.name
            expect(page.locator("[data-user]")).to_have_text(app_page.user)


def test_times_show_in_the_viewers_time_zone_with_the_absolute_time_on_hover(data, contexts):
    context = contexts(timezone_id="Asia/Tokyo", locale="en-US")
    page = open_as(context, "olivia", f"/runs/{data.run.pk}/")
    created = page.locator(f'time[datetime="{CREATED:%Y-%m-%dT%H:%M:%SZ}"]')
    expect(created).to_have_text("2026-05-01 23:03:07 GMT+9")
    title = created.get_attribute("title") or ""
    assert "Asia/Tokyo" in title, title
    assert "2026-05-01 14:03:07 UTC" in title, title
    assert "11:03:07 PM" in title, title
