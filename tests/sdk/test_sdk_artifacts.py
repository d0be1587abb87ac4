"""The Python SDK's artifact methods against a real agentops (daphne, PostgreSQL, artifacts in
a directory of the test's own): upload bytes, a file and a stream, list, read, download whole,
by range and to a file, delete; another project's artifact is not found; and a step result
the server kept as an artifact comes back resolved, checked against its SHA-256."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentops_client import (
    AgentOpsError,
    Artifact,
    ArtifactMismatch,
    BadRequest,
    Client,
    Conflict,
    IdempotencyMismatch,
    NotFound,
    TooLarge,
)

from projects.models import Project
from tests.conftest import AsgiServer
from testsupport.factories import make_token, make_user

pytestmark = pytest.mark.django_db(transaction=True)

# Step results over this many bytes of JSON are kept as artifacts by the test's server.
THRESHOLD = 4096


@pytest.fixture(scope="module")
def artifact_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("artifacts")


@pytest.fixture(scope="module")
def server(django_db_setup: None, artifact_dir: Path, tmp_path_factory) -> Iterator[AsgiServer]:
    """daphne keeping artifacts in ``artifact_dir``, offloading results over ``THRESHOLD``,
    refusing artifacts over 1 MiB."""
    started = AsgiServer(
        tmp_path_factory.mktemp("daphne-artifacts") / "daphne.log",
        AGENTOPS_ARTIFACT_DIR=str(artifact_dir),
        AGENTOPS_ARTIFACT_RESULT_THRESHOLD_BYTES=str(THRESHOLD),
        AGENTOPS_ARTIFACT_MAX_BYTES=str(1024 * 1024),
    )
    yield started
    started.stop()


@pytest.fixture
def client(server: AsgiServer, seeded: None) -> Iterator[Client]:
    with Client(server.url, make_token(make_user("agent", "operator")), websocket=False) as made:
        yield made


def test_upload_list_read_download_and_delete(client: Client, artifact_dir: Path, tmp_path: Path):
    run_id = client.create_run("write a report").id
    text = client.upload_artifact(
        run_id, b"# Report\n\nAll good.\n", name="report.md", content_type="text/markdown"
    )
    assert isinstance(text, Artifact)
    assert (text.name, text.content_type, text.declared_type) == (
        "report.md",
        "text/plain",
        "text/markdown",
    )
    assert text.sha256 == hashlib.sha256(b"# Report\n\nAll good.\n").hexdigest()

    local = tmp_path / "data.bin"
    payload = bytes(range(256)) * 1024
    local.write_bytes(payload)
    from_path = client.upload_artifact(run_id, local)
    assert (from_path.name, from_path.size) == ("data.bin", len(payload))
    from_stream = client.upload_artifact(
        run_id, io.BytesIO(b'{"k": 1}'), name="k.json", content_type="application/json"
    )
    assert from_stream.content_type == "application/json"

    assert [a.id for a in client.list_artifacts(run_id)] == [from_stream.id, from_path.id, text.id]
    assert client.get_artifact(text.id) == text
    assert client.download_artifact(from_path.id) == payload
    assert client.download_artifact(from_path.id, start=1000, end=1999) == payload[1000:2000]
    assert client.download_artifact(from_path.id, start=len(payload) - 3) == payload[-3:]
    copy = tmp_path / "copy.bin"
    assert client.download_artifact(from_path.id, copy) == len(payload)
    assert copy.read_bytes() == payload

    client.delete_artifact(from_path.id, reason="not needed")
    with pytest.raises(NotFound):
        client.get_artifact(from_path.id)
    assert [a.id for a in client.list_artifacts(run_id)] == [from_stream.id, text.id]
    stored = {path.name for path in artifact_dir.rglob("*") if path.is_file()}
    assert from_path.id not in stored
    assert {text.id, from_stream.id} <= stored


def test_refusals_raise_their_errors(client: Client, seeded: None):
    run_id = client.create_run("refusals").id
    with pytest.raises(BadRequest, match="not the declared"):
        client.upload_artifact(
            run_id, b"<html><script>x</script></html>", name="a.png", content_type="image/png"
        )
    with pytest.raises(TooLarge):
        client.upload_artifact(
            run_id, b"x" * (1024 * 1024 + 1), name="big.txt", content_type="text/plain"
        )
    with pytest.raises(NotFound):
        client.upload_artifact("00000000-0000-0000-0000-000000000000", b"x", name="x.txt")
    mine = client.upload_artifact(run_id, b"mine\n", name="mine.txt", content_type="text/plain")
    with pytest.raises(AgentOpsError) as past_the_end:
        client.download_artifact(mine.id, start=100)
    assert past_the_end.value.status == 416
    # Another project's agent sees nothing of it.
    elsewhere = Project.objects.create(slug="elsewhere", name="Elsewhere")
    other_user = make_user("other", "operator", project=elsewhere)
    with Client(client.aio.base_url, make_token(other_user, elsewhere), websocket=False) as other:
        with pytest.raises(NotFound):
            other.get_artifact(mine.id)
        with pytest.raises(NotFound):
            other.download_artifact(mine.id)
        with pytest.raises(NotFound):
            other.delete_artifact(mine.id)
        with pytest.raises(NotFound):
            other.upload_artifact(run_id, b"planted\n", name="p.txt", content_type="text/plain")
        assert other.list_artifacts() == []
    assert client.download_artifact(mine.id) == b"mine\n"


def test_a_large_step_result_comes_back_resolved(client: Client, artifact_dir: Path):
    run = client.start_run("fetch everything")
    rows: list[dict[str, Any]] = [{"n": n, "text": "row " * 5} for n in range(300)]
    result = run.call_tool(
        "get_reservation_details", {"reservation_id": "ABC123"}, lambda **_: {"rows": rows}
    )
    assert result == {"rows": rows}
    step_id = client.list_artifacts(run.run_id)[0].step
    assert step_id is not None
    # The server keeps a reference; the SDK hands out the value.
    stored = client.get_step(run.run_id, step_id)
    assert stored.result == {"rows": rows}
    assert stored.raw["result"]["$artifact"] == client.list_artifacts(run.run_id)[0].id
    assert client.resolve(stored.raw["result"]) == {"rows": rows}
    # Content that is no longer what the reference names is refused: altered in place...
    (artifact_file,) = artifact_dir.rglob(stored.raw["result"]["$artifact"])
    original = artifact_file.read_bytes()
    artifact_file.write_bytes(original.replace(b"row", b"won"))
    with pytest.raises(ArtifactMismatch):
        client.resolve(stored.raw["result"])
    # ... or cut short: refused before any byte is sent.
    artifact_file.write_bytes(original[:100])
    with pytest.raises(Conflict, match="verify_artifacts"):
        client.resolve(stored.raw["result"])


def test_an_upload_repeated_with_its_idempotency_key_gets_the_same_artifact(
    client: Client, artifact_dir: Path
):
    run_id = client.create_run("write a report").id
    first = client.upload_artifact(run_id, b"once\n", name="a.txt", idempotency_key="report-1")
    again = client.upload_artifact(run_id, b"once\n", name="a.txt", idempotency_key="report-1")
    assert again == first
    stored = [path.name for path in artifact_dir.rglob(f"*/{run_id}/*") if path.is_file()]
    assert stored == [first.id]
    with pytest.raises(IdempotencyMismatch):
        client.upload_artifact(run_id, b"twice\n", name="a.txt", idempotency_key="report-1")
