"""``seed_demo --credentials FILE`` (what ``scripts/start`` runs) writes the demo's passwords,
addresses and token command to a file only its owner may read, prints no password, and the
token command it writes works as written in a new shell (nothing of this one's environment)."""

import os
import re
import stat
import subprocess
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from testsupport.database import django_database_url

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_credentials_file_is_private_and_its_token_command_works(
    tmp_path, monkeypatch, seeded, client
):
    # The database the command was started on: here the test database.
    monkeypatch.setenv("DATABASE_URL", django_database_url())
    path = tmp_path / "credentials.txt"
    path.write_text("an older file, readable by all\n")
    path.chmod(0o644)
    out = StringIO()

    call_command("seed_demo", credentials=path, url="http://127.0.0.1:8123/", stdout=out)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert "older file" not in text
    assert "http://127.0.0.1:8123/  (admin: http://127.0.0.1:8123/admin/)" in text
    passwords = dict(re.findall(r"^user (\w+) +password (\S+)$", text, re.MULTILINE))
    assert set(passwords) == {"operator", "reviewer", "admin"}
    for username, password in passwords.items():
        assert get_user_model().objects.get(username=username).check_password(password)
        assert password not in out.getvalue()
    assert f"passwords written to {path}" in out.getvalue()

    (line,) = [line.strip() for line in text.splitlines() if "create_api_token" in line]
    fresh_shell = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    result = subprocess.run(
        ["/bin/bash", "-c", line],
        cwd=tmp_path,
        env=fresh_shell,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    token = result.stdout.strip()
    response = client.get("/api/v1/runs/", HTTP_AUTHORIZATION=f"Token {token}")
    assert response.status_code == 200
    assert len(response.json()["results"]) == 4  # the demo runs, seen with the new token
