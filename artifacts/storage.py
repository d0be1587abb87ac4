"""The artifacts storage (``settings.STORAGES["artifacts"]``): writing a stream to it while
hashing and measuring it, reading a byte range back in chunks, and sniffing a file's type.

Every read and write goes through Django's storage API, except ranged reads from an S3
bucket: django-storages' ``S3File`` downloads a whole object before its first read, so a range
of an S3 object is read with one ranged GET (``Range: bytes=a-b``) on the storage's
``bucket``, streamed.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Generator
from typing import IO, Any, cast

import magic
from django.core.files import File
from django.core.files.storage import Storage, storages

from agentops.errors import TooLarge

# Bytes moved per read or write: large enough for few system calls, small enough that a
# stream never holds more than this in memory.
CHUNK_BYTES = 256 * 1024
# Bytes libmagic reads to tell a file's type (its own default look-ahead is 1 MiB; 8 KiB
# tells every type this app treats apart: HTML, SVG, XML, JSON, text, images, PDF).
SNIFF_BYTES = 8 * 1024


def artifact_storage() -> Storage:
    """The configured artifacts storage (looked up per call: tests swap it)."""
    return storages["artifacts"]


def sniff(head: bytes) -> str:
    """The media type libmagic reads from ``head`` (a file's first bytes), such as
    ``text/html``, ``image/svg+xml``, ``application/json``; ``application/x-empty`` for no
    bytes."""
    return str(magic.from_buffer(head, mime=True))


class HashingReader(io.RawIOBase):
    """A read-only, unseekable stream over ``source`` (anything with ``read(n)``) that hashes
    (SHA-256) and counts what passes, and raises ``TooLarge`` once more than ``limit`` bytes
    came.

    ``head`` is the first ``SNIFF_BYTES`` bytes, read ahead at construction (for sniffing
    before anything is stored) and given out again by the first reads.
    """

    def __init__(self, source: Any, *, limit: int) -> None:
        super().__init__()
        self._source = source
        self._limit = limit
        self._hash = hashlib.sha256()
        self.size = 0
        self.head = self._take(SNIFF_BYTES)
        self._pending = self.head

    def _take(self, count: int) -> bytes:
        data: bytes = self._source.read(count)
        self.size += len(data)
        if self.size > self._limit:
            raise TooLarge(f"the artifact exceeds this project's limit of {self._limit} bytes")
        self._hash.update(data)
        return data

    def read(self, count: int = -1) -> bytes:
        """Up to ``count`` bytes (all that is left with a negative ``count``)."""
        if self._pending:
            out = self._pending if count < 0 else self._pending[:count]
            self._pending = self._pending[len(out) :]
            return out
        if count < 0:
            return b"".join(iter(lambda: self._take(CHUNK_BYTES), b""))
        return self._take(count)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        """Read into ``buffer`` (what ``io`` readers call); the bytes read."""
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    @property
    def sha256(self) -> str:
        """The hex SHA-256 of the bytes read so far."""
        return self._hash.hexdigest()


def store(name: str, reader: HashingReader) -> str:
    """Write ``reader`` to the artifacts storage as ``name``; the name the storage gave it
    (the same, as names are unique)."""
    # The storage reads the stream in chunks (File.chunks(), S3's multipart upload): never
    # the whole of it at once.
    # An io stream, typed as one for File (RawIOBase is not an IO[bytes] to typeshed).
    return artifact_storage().save(name, File(cast(IO[bytes], reader), name=name))


def read_chunks(name: str, start: int = 0, stop: int | None = None) -> Generator[bytes, None, None]:
    """The bytes ``start`` to ``stop`` (exclusive; None: the end) of stored file ``name``, in
    chunks of at most ``CHUNK_BYTES``.

    Raises:
        FileNotFoundError, OSError, or the storage's own error: the file cannot be read.
    """
    if stop is not None and stop <= start:
        return
    storage = artifact_storage()
    bucket = getattr(storage, "bucket", None)
    if bucket is not None:
        byte_range = f"bytes={start}-" + ("" if stop is None else str(stop - 1))
        body = bucket.Object(name).get(Range=byte_range)["Body"]
        try:
            yield from body.iter_chunks(CHUNK_BYTES)
        finally:
            body.close()
        return
    with storage.open(name, "rb") as handle:
        handle.seek(start)
        left = None if stop is None else stop - start
        while left is None or left > 0:
            data = handle.read(CHUNK_BYTES if left is None else min(CHUNK_BYTES, left))
            if not data:
                return
            if left is not None:
                left -= len(data)
            yield data


def stored_size(name: str) -> int | None:
    """The size in bytes of stored file ``name``; None when it is missing or cannot be read
    (each storage backend raises its own errors)."""
    try:
        return artifact_storage().size(name)
    except Exception:
        return None


def delete_files(names: list[str]) -> None:
    """Delete the stored files ``names`` (a missing one is no error)."""
    storage = artifact_storage()
    for name in names:
        storage.delete(name)
