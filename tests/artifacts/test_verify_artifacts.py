"""``manage.py verify_artifacts`` reads every file back: a tampered or missing file is listed
and the command fails; intact files pass."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from agentops.actors import Actor
from artifacts.models import Artifact
from artifacts.services import artifact_upload

pytestmark = pytest.mark.django_db


def _upload(run, content: bytes, name: str) -> Artifact:
    return artifact_upload(
        run_id=run.pk,
        name=name,
        declared_type="text/plain",
        stream=io.BytesIO(content),
        actor=Actor.system(),
    )


def test_intact_files_pass(run, capsys):
    _upload(run, b"one\n", "one.txt")
    _upload(run, b"two\n", "two.txt")
    call_command("verify_artifacts")
    assert "2 artifacts verified" in capsys.readouterr().out


def test_a_tampered_and_a_missing_file_are_listed_and_fail_the_command(run, artifact_dir, capsys):
    intact = _upload(run, b"intact\n", "intact.txt")
    tampered = _upload(run, b"the report says yes\n", "report.txt")
    same_size = _upload(run, b"approved\n", "same-size.txt")
    missing = _upload(run, b"gone\n", "gone.txt")
    (artifact_dir / tampered.storage_name).write_bytes(b"the report says no, really\n")
    # Same length, one byte changed: only the checksum tells.
    (artifact_dir / same_size.storage_name).write_bytes(b"approvee\n")
    (artifact_dir / missing.storage_name).unlink()

    with pytest.raises(CommandError, match="3 of 4 artifacts are missing or altered"):
        call_command("verify_artifacts")
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    by_id = {line.split()[1]: line for line in lines}
    assert by_id[str(tampered.pk)].startswith("ALTERED")
    assert by_id[str(same_size.pk)].startswith("ALTERED")
    assert f"sha256 {same_size.sha256}" in by_id[str(same_size.pk)]
    assert by_id[str(missing.pk)].startswith("MISSING")
    assert str(intact.pk) not in by_id
    # Narrowed to a run: the same findings.
    with pytest.raises(CommandError):
        call_command("verify_artifacts", run=str(run.pk))
