"""Safe defaults: development mode only when asked for, no secret key or audit key to fall back
on, a Content-Security-Policy on every response, the API docs served from the project."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest
from django.urls import reverse

from testsupport.processes import ROOT

pytestmark = pytest.mark.django_db


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    unset = ("DEBUG", "SECRET_KEY", "AGENTOPS_AUDIT_KEY")
    base = {k: v for k, v in os.environ.items() if k not in unset}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_without_debug_and_secret_key_nothing_starts():
    done = _manage("check")
    assert done.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in done.stderr


def test_without_debug_and_audit_key_nothing_starts():
    done = _manage("check", SECRET_KEY=secrets.token_urlsafe(60))
    assert done.returncode != 0
    assert "AGENTOPS_AUDIT_KEY must be set when DEBUG is off" in done.stderr


def test_debug_is_off_unless_set_and_the_deploy_check_is_clean():
    keys = {"SECRET_KEY": secrets.token_urlsafe(60), "AGENTOPS_AUDIT_KEY": secrets.token_hex(32)}
    shown = _manage(
        "shell", "-c", "from django.conf import settings; print(settings.DEBUG)", **keys
    )
    assert shown.stdout.strip().splitlines()[-1] == "False"
    deploy = _manage("check", "--deploy", ALLOWED_HOSTS="agentops.example.com", **keys)
    assert deploy.returncode == 0, deploy.stderr
    assert "System check identified no issues" in deploy.stdout


def test_every_response_carries_the_content_security_policy(client, operator):
    client.force_login(operator)
    for url in (reverse("run-list"), reverse("api-docs"), "/api/v1/tools/", "/no-such-page/"):
        policy = client.get(url)["Content-Security-Policy"]
        assert "script-src 'self';" in policy
        assert "frame-ancestors 'none'" in policy


def test_the_api_docs_load_nothing_from_elsewhere(client, operator):
    client.force_login(operator)
    html = client.get(reverse("api-docs")).content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in html
    assert "cdn" not in html.lower()
    assert "<script>" not in html
