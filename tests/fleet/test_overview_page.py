"""The overview and workers pages: who may open them, the nav, and the overview's markup
(four chart canvases, scripts from the project's own static files only)."""

import re

import pytest
from django.urls import reverse

from testsupport.factories import make_user

pytestmark = pytest.mark.django_db


def test_the_overview_page_loads_its_charts_from_static_files(client, operator):
    client.force_login(operator)
    response = client.get(reverse("fleet-overview"), {"window": "24h"})
    assert response.status_code == 200
    html = response.content.decode()
    assert re.findall(r'<canvas data-chart="(\w+)"', html) == [
        "throughput",
        "failures",
        "approvals",
        "cost",
    ]
    scripts = re.findall(r"<script([^>]*)>", html)
    sources = [re.search(r'src="([^"]+)"', attrs) for attrs in scripts]
    # No inline script (the CSP would refuse it): every one is a static file of the project.
    assert all(source and source.group(1).startswith("/static/") for source in sources)
    paths = [source.group(1) for source in sources if source]
    assert paths.index("/static/vendor/chartjs/chart.umd.min.js") < paths.index(
        "/static/js/overview.js"
    )
    assert 'data-window="24h"' in html
    assert 'data-url="/overview/data/"' in html
    assert 'aria-current="page">Overview<' in html
    assert "'self'" in response["Content-Security-Policy"]
    assert (
        "unsafe-inline"
        not in response["Content-Security-Policy"].split("script-src")[1].split(";")[0]
    )


def test_an_unknown_window_falls_back_to_the_last_hour(client, operator):
    client.force_login(operator)
    html = client.get(reverse("fleet-overview"), {"window": "<script>"}).content.decode()
    assert 'data-window="1h"' in html
    assert "<script>" not in html


def test_the_nav_shows_workers_to_operators_only(client, operator):
    client.force_login(operator)
    assert ">Workers<" in client.get(reverse("run-list")).content.decode()
    viewer = make_user("vera", "viewer")
    client.force_login(viewer)
    html = client.get(reverse("run-list")).content.decode()
    assert ">Overview<" in html
    assert ">Workers<" not in html


@pytest.mark.parametrize("name", ["fleet-overview", "fleet-overview-data", "fleet-workers"])
def test_the_pages_need_a_signed_in_member(client, seeded, name):
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    client.force_login(make_user("nobody"))
    assert client.get(reverse(name)).status_code == 403
