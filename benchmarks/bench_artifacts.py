"""Artifacts: the web process's memory while it takes a 1 GiB upload and serves it back.

Each repetition starts, in turn, one daphne process and one uvicorn process serving the
project's ``web.asgi`` application, each keeping artifacts in a fresh directory; against each
it uploads ``size_mib`` MiB of random bytes to a run
(``POST /api/v1/artifacts/``, streamed from the client, with Content-Length) and downloads it
(``GET .../content/``, read as it arrives), checking the SHA-256 both ways. A thread samples
the daphne process's resident set size (RSS, psutil) every 20 ms: each figure is its peak
during the transfer minus its RSS just before (MiB). The baseline is the same figure for a
1 MiB artifact in the same repetition: what any request costs, whatever its size. The
throughput rows (MiB/s) have for baseline a plain copy of the same file on the same disk.

Why two servers: daphne 4 reads a request's whole body from its spool file into its queue of
ASGI messages before the application runs (``daphne/http_protocol.py``, ``process``), so the
daphne process holds every uploaded byte in memory once, whatever the application does with
them; uvicorn applies flow control (it stops reading the socket while the application has not
taken the body so far). agentops streams the body to the storage in 256 KiB chunks under
either (Django's ASGI handler spools it to a temporary file first); the download streams
under both.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from benchmarks.data import bench_users
from benchmarks.harness import Bench
from benchmarks.table import Figure, Sample, Target
from testsupport.processes import Process, daphne_command, free_port, uvicorn_command

NAME = "artifacts"
MIB = 1024 * 1024
# Bytes sent or read per chunk by the client.
CHUNK = MIB


@dataclass(frozen=True)
class Size:
    size_mib: int


SIZES = {"tiny": Size(size_mib=16), "full": Size(size_mib=1024)}

SERVERS = ("daphne", "uvicorn")
FIGURES = [
    figure
    for server in SERVERS
    for figure in (
        Figure(
            f"upload_rss_{server}",
            f"{server}: RSS growth taking the upload (baseline: 1 MiB)",
            "MiB",
            (Target("<", 64),),
        ),
        Figure(
            f"download_rss_{server}",
            f"{server}: RSS growth serving the download (baseline: 1 MiB)",
            "MiB",
            (Target("<", 64),),
        ),
        Figure(f"upload_rate_{server}", f"{server}: upload rate (baseline: file copy)", "MiB/s"),
        Figure(
            f"download_rate_{server}", f"{server}: download rate (baseline: file copy)", "MiB/s"
        ),
    )
]


def _command(server: str, port: int) -> list[str]:
    """The command serving ``web.asgi`` with ``server`` (daphne or uvicorn) on ``port``."""
    if server == "daphne":
        return daphne_command(port=port)
    return [*uvicorn_command(port=port), "--log-level", "warning"]


class PeakRss:
    """The peak RSS (bytes) of process ``pid`` while the block runs, sampled every 20 ms."""

    def __init__(self, pid: int) -> None:
        self._process = psutil.Process(pid)
        self.before = self._process.memory_info().rss
        self.peak = self.before
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(0.02):
            self.peak = max(self.peak, self._process.memory_info().rss)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, self._process.memory_info().rss)

    @property
    def growth_mib(self) -> float:
        return (self.peak - self.before) / MIB


def _random_chunks(size_mib: int, digest: hashlib._Hash) -> Iterator[bytes]:
    block = os.urandom(CHUNK)
    for n in range(size_mib):
        chunk = block[n % 7 :] + block[: n % 7]  # no two chunks alike, no time spent on urandom
        digest.update(chunk)
        yield chunk


def _transfer(url: str, token: str, run_id: str, size_mib: int, pid: int) -> tuple[float, ...]:
    """Upload then download ``size_mib`` MiB; (upload RSS growth MiB, download RSS growth MiB,
    upload MiB/s, download MiB/s)."""
    headers = {"Authorization": f"Token {token}"}
    sent = hashlib.sha256()
    with httpx.Client(base_url=url, headers=headers, timeout=600) as client:
        with PeakRss(pid) as upload_rss:
            began = time.monotonic()
            response = client.post(
                "/api/v1/artifacts/",
                params={"run": run_id, "name": "blob.bin"},
                content=_random_chunks(size_mib, sent),
                headers={
                    "Content-Type": "application/octet-stream",
                    "Content-Length": str(size_mib * MIB),
                },
            )
            upload_s = time.monotonic() - began
        response.raise_for_status()
        artifact = response.json()
        if artifact["sha256"] != sent.hexdigest():
            raise RuntimeError("the server's SHA-256 is not the one sent")
        received = hashlib.sha256()
        with PeakRss(pid) as download_rss:
            began = time.monotonic()
            with client.stream("GET", artifact["href"]) as streamed:
                streamed.raise_for_status()
                for chunk in streamed.iter_bytes(CHUNK):
                    received.update(chunk)
            download_s = time.monotonic() - began
        if received.hexdigest() != sent.hexdigest():
            raise RuntimeError("the download is not the upload")
        client.delete(f"/api/v1/artifacts/{artifact['id']}/").raise_for_status()
    return (
        upload_rss.growth_mib,
        download_rss.growth_mib,
        size_mib / upload_s,
        size_mib / download_s,
    )


def _copy_rate(size_mib: int, where: Path) -> float:
    """MiB/s of a plain copy of a ``size_mib`` MiB file in ``where``."""
    source, target = where / "copy-source", where / "copy-target"
    with source.open("wb") as handle:
        for chunk in _random_chunks(size_mib, hashlib.sha256()):
            handle.write(chunk)
    began = time.monotonic()
    shutil.copyfile(source, target)
    with target.open("rb") as handle:
        os.fsync(handle.fileno())
    rate = size_mib / (time.monotonic() - began)
    source.unlink()
    target.unlink()
    return rate


def run(bench: Bench) -> Iterator[Sample]:
    from agentops.actors import Actor
    from runs.control.create import run_create

    size = SIZES[bench.size]
    users = bench_users()
    run_id = str(
        run_create(actor=Actor.for_user(users["operator"]), agent="client", goal="artifacts").pk
    )
    for repetition in range(bench.repeat):
        for server in SERVERS:
            yield from _measure(bench, server, repetition, size, users["operator_token"], run_id)


def _measure(
    bench: Bench, server: str, repetition: int, size: Size, token: str, run_id: str
) -> Iterator[Sample]:
    where = Path(tempfile.mkdtemp(prefix="agentops-bench-artifacts-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**bench.env(), "AGENTOPS_DB_POOL": "1", "AGENTOPS_ARTIFACT_DIR": str(where)}
    process = Process(
        _command(server, port), env, bench.logs / f"artifacts-{server}-{repetition}.log"
    )
    try:
        process.wait_until(functools.partial(_answers, url), server)
        small = _transfer(url, token, run_id, 1, process.pid)
        large = _transfer(url, token, run_id, size.size_mib, process.pid)
    finally:
        process.stop()
    copy = _copy_rate(size.size_mib, where)
    shutil.rmtree(where, ignore_errors=True)
    yield Sample(f"upload_rss_{server}", large[0], small[0])
    yield Sample(f"download_rss_{server}", large[1], small[1])
    yield Sample(f"upload_rate_{server}", large[2], copy)
    yield Sample(f"download_rate_{server}", large[3], copy)


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/accounts/login/", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
