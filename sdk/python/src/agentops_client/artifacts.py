"""Artifacts in the SDK: upload a file, bytes or a stream to a run, list, read, download (whole,
a byte range, or to a file) and delete artifacts, and resolve the ``{"$artifact": id, ...}``
references the server leaves in a step whose result was too large to keep in it.

``AsyncArtifactMethods`` is a base of ``AsyncClient`` and ``ArtifactMethods`` of ``Client``:
``client.upload_artifact(...)`` and so on. Step results are resolved transparently by
``get_step`` and ``report`` (``resolve_step``), checked against the reference's SHA-256.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

import httpx

from agentops_client import _protocol as p
from agentops_client.errors import AgentOpsError
from agentops_client.models import Step

if TYPE_CHECKING:
    from agentops_client.aio import AsyncClient

T = TypeVar("T")
# Bytes read from a local file per chunk of an upload.
CHUNK_BYTES = 256 * 1024
REFERENCE_KEY = "$artifact"


@dataclass(frozen=True)
class Artifact:
    """An artifact: ``id``, its ``run`` and ``step`` (id or None), ``name``,
    ``content_type`` (as the server sniffed it), ``declared_type`` (as uploaded), ``size``
    (bytes), ``sha256`` (hex), ``kind`` (``upload`` | ``result``), ``href`` (its content's
    path) and the full JSON (``raw``)."""

    id: str
    run: str
    step: int | None
    name: str
    content_type: str
    declared_type: str
    size: int
    sha256: str
    kind: str
    href: str
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Artifact:
        return cls(
            id=data["id"],
            run=data["run"],
            step=data.get("step"),
            name=data["name"],
            content_type=data["content_type"],
            declared_type=data["declared_type"],
            size=data["size"],
            sha256=data["sha256"],
            kind=data["kind"],
            href=data["href"],
            raw=data,
        )


class ArtifactMismatch(AgentOpsError):
    """Downloaded content whose SHA-256 or size is not the one its reference names."""


def is_reference(value: Any) -> bool:
    """Whether ``value`` is a reference to an artifact holding a step's result."""
    return isinstance(value, dict) and isinstance(value.get(REFERENCE_KEY), str)


async def _file_chunks(handle: IO[bytes]) -> AsyncIterator[bytes]:
    while chunk := await asyncio.to_thread(handle.read, CHUNK_BYTES):
        yield chunk


class AsyncArtifactMethods:
    """The artifact methods of ``AsyncClient``."""

    _http: httpx.AsyncClient

    async def upload_artifact(
        self,
        run_id: str,
        content: bytes | str | os.PathLike[str] | IO[bytes],
        *,
        name: str | None = None,
        content_type: str = "application/octet-stream",
        step_id: int | None = None,
        size: int | None = None,
        idempotency_key: str | None = None,
    ) -> Artifact:
        """Upload ``content`` as an artifact of run ``run_id`` (and of its step
        ``step_id``): bytes, a local file's path (read in chunks, never whole in memory), or
        a binary file object (read in chunks; ``size`` in bytes is needed when it cannot
        seek). ``name`` defaults to the file's name; ``content_type`` is the declared type,
        checked by the server against the content. Not retried (a stream is read once); with
        ``idempotency_key`` (1 to 255 visible ASCII characters) an upload the caller repeats
        gets the first one's artifact back, and nothing is stored twice.

        Raises:
            BadRequest: a bad name or type, content that is not the declared type.
            NotFound: no such run or step (or one the token may not see).
            TooLarge: over the project's limit.
            IdempotencyMismatch: ``idempotency_key`` named another upload.
            Conflict: an upload with ``idempotency_key`` was still being stored.
        """
        upload: dict[str, Any] = {
            "name": name,
            "content_type": content_type,
            "step_id": step_id,
            "idempotency_key": idempotency_key,
        }
        if isinstance(content, bytes):
            return await self._upload(run_id, content, len(content), **upload)
        if isinstance(content, (str, os.PathLike)):
            path = Path(content)
            with path.open("rb") as handle:
                upload["name"] = name or path.name
                return await self._upload(
                    run_id, _file_chunks(handle), path.stat().st_size, **upload
                )
        if size is None:
            start = content.tell()
            size = content.seek(0, os.SEEK_END) - start
            content.seek(start)
        upload["name"] = name or Path(getattr(content, "name", "") or "artifact").name
        return await self._upload(run_id, _file_chunks(content), size, **upload)

    async def _upload(
        self,
        run_id: str,
        body: bytes | AsyncIterator[bytes],
        size: int,
        *,
        name: str | None,
        content_type: str,
        step_id: int | None,
        idempotency_key: str | None,
    ) -> Artifact:
        params: dict[str, Any] = {"run": run_id, "name": name or "artifact"}
        if step_id is not None:
            params["step"] = step_id
        headers = {"Content-Type": content_type, "Content-Length": str(size)}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        response = await self._http.post(
            "/artifacts/", content=body, params=params, headers=headers
        )
        return Artifact.from_json(p.parse(response.status_code, response.text))

    async def list_artifacts(
        self, run_id: str | None = None, *, step_id: int | None = None
    ) -> list[Artifact]:
        """The artifacts (of run ``run_id``, of step ``step_id``), newest first, every page."""
        params: dict[str, Any] = {}
        if run_id is not None:
            params["run"] = run_id
        if step_id is not None:
            params["step"] = step_id
        found: list[Artifact] = []
        url: str | None = "/artifacts/"
        while url is not None:
            response = await self._http.get(url, params=params)
            page = p.parse(response.status_code, response.text)
            found.extend(Artifact.from_json(item) for item in page["results"])
            url, params = page.get("next"), {}
        return found

    async def get_artifact(self, artifact_id: str) -> Artifact:
        """One artifact's description. Raises ``NotFound``."""
        response = await self._http.get(f"/artifacts/{artifact_id}/")
        return Artifact.from_json(p.parse(response.status_code, response.text))

    async def iter_artifact(
        self, artifact_id: str, *, start: int = 0, end: int | None = None
    ) -> AsyncIterator[bytes]:
        """The content of artifact ``artifact_id`` from byte ``start`` to byte ``end``
        (inclusive; None: the end), as it arrives.

        Raises:
            NotFound: no such artifact. AgentOpsError: the range starts past the end (416).
        """
        headers = {}
        if start or end is not None:
            headers["Range"] = f"bytes={start}-{'' if end is None else end}"
        async with self._http.stream(
            "GET", f"/artifacts/{artifact_id}/content/", headers=headers
        ) as response:
            if response.status_code >= 400:
                await response.aread()
                p.parse(response.status_code, response.text)
            async for chunk in response.aiter_bytes():
                yield chunk

    async def download_artifact(
        self,
        artifact_id: str,
        to: str | os.PathLike[str] | None = None,
        *,
        start: int = 0,
        end: int | None = None,
    ) -> bytes | int:
        """The content of artifact ``artifact_id`` (bytes ``start`` to ``end``, inclusive):
        returned as bytes, or written to the file ``to`` (in chunks), returning the bytes
        written. Raises what ``iter_artifact`` raises."""
        chunks = self.iter_artifact(artifact_id, start=start, end=end)
        if to is None:
            return b"".join([chunk async for chunk in chunks])
        written = 0
        with Path(to).open("wb") as handle:
            async for chunk in chunks:
                await asyncio.to_thread(handle.write, chunk)
                written += len(chunk)
        return written

    async def resolve(self, value: Any) -> Any:
        """``value`` itself, or the JSON held by the artifact when it is a reference
        (``{"$artifact": id, "sha256": ..., "size": ...}``), checked against its SHA-256.

        Raises:
            ArtifactMismatch: the content is not the one the reference names.
        """
        if not is_reference(value):
            return value
        data = await self.download_artifact(value[REFERENCE_KEY])
        assert isinstance(data, bytes)
        digest = hashlib.sha256(data).hexdigest()
        if digest != value.get("sha256", digest) or len(data) != value.get("size", len(data)):
            raise ArtifactMismatch(
                200, f"artifact {value[REFERENCE_KEY]} is not the one referenced (sha256 {digest})"
            )
        return json.loads(data)

    async def resolve_step(self, step: Step) -> Step:
        """``step`` with its result resolved (``resolve``) when it is a reference."""
        if not is_reference(step.result):
            return step
        return replace(step, result=await self.resolve(step.result))

    async def delete_artifact(self, artifact_id: str, reason: str = "") -> None:
        """Delete artifact ``artifact_id`` and its file (audited with ``reason``). Raises
        ``NotFound``."""
        response = await self._http.delete(
            f"/artifacts/{artifact_id}/", params={"reason": reason} if reason else None
        )
        p.parse(response.status_code, response.text)


class ArtifactMethods:
    """The artifact methods of ``Client``: ``AsyncArtifactMethods``' run on its loop."""

    aio: AsyncClient

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        raise NotImplementedError

    def upload_artifact(self, run_id: str, content: Any, **options: Any) -> Artifact:
        """See ``AsyncArtifactMethods.upload_artifact``."""
        return self._run(self.aio.upload_artifact(run_id, content, **options))

    def list_artifacts(self, run_id: str | None = None, **options: Any) -> list[Artifact]:
        """See ``AsyncArtifactMethods.list_artifacts``."""
        return self._run(self.aio.list_artifacts(run_id, **options))

    def get_artifact(self, artifact_id: str) -> Artifact:
        """See ``AsyncArtifactMethods.get_artifact``."""
        return self._run(self.aio.get_artifact(artifact_id))

    def download_artifact(self, artifact_id: str, to: Any = None, **options: Any) -> bytes | int:
        """See ``AsyncArtifactMethods.download_artifact``."""
        return self._run(self.aio.download_artifact(artifact_id, to, **options))

    def resolve(self, value: Any) -> Any:
        """See ``AsyncArtifactMethods.resolve``."""
        return self._run(self.aio.resolve(value))

    def delete_artifact(self, artifact_id: str, reason: str = "") -> None:
        """See ``AsyncArtifactMethods.delete_artifact``."""
        self._run(self.aio.delete_artifact(artifact_id, reason))
