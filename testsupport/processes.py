"""The project's child processes: one wrapper, and the commands that start workers, beat and
the web servers (uvicorn, as ``scripts/start`` serves the app; daphne, for comparisons)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(
    predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05
) -> Any:
    """Poll ``predicate`` until it returns a truthy value, which is returned.

    Raises:
        TimeoutError: not within ``timeout`` seconds (the message names ``what``).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        time.sleep(interval)


def child_pids(pid: int) -> list[int]:
    """The ids of the direct children of process ``pid`` (a worker's pool processes)."""
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
    return [int(line) for line in out.stdout.split()]


def cpu_seconds(pids: Iterable[int]) -> dict[int, float]:
    """The CPU time (user + system, seconds) each process of ``pids`` and its descendants have
    used so far, by pid of ``pids``: read from ``/proc/<pid>/stat`` (Linux; ``{}`` elsewhere).
    A process that has ended counts 0 (a descendant's time counts while it lives: a benchmark
    reads before and after, with the processes running)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # After the command's closing parenthesis: state, ppid, ..., utime (14th), stime.
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        used[pid] = (int(fields[11]) + int(fields[12])) / tick

    def root_of(pid: int, roots: set[int]) -> int | None:
        while pid not in roots and pid > 1:
            pid = parent.get(pid, 0)
        return pid if pid in roots else None

    roots = set(pids)
    totals = dict.fromkeys(roots, 0.0)
    for pid, seconds in used.items():
        root = root_of(pid, roots)
        if root is not None:
            totals[root] += seconds
    return totals


def sigkill(pid: int) -> None:
    """SIGKILL process ``pid`` if it still exists."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


class Process:
    """A process of the project, started from the project root in its own process group (so
    that stopping it also stops what it forked, e.g. Celery's pool processes); its output is
    appended to ``log``. ``name`` names it in errors."""

    def __init__(
        self,
        cmd: list[str],
        env: dict[str, str],
        log: Path,
        *,
        name: str = "",
        pass_fds: tuple[int, ...] = (),
    ):
        self.name = name or Path(cmd[0]).name
        self.log = log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                cmd,
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=pass_fds,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_until(self, ready: Callable[[], bool], what: str, timeout: float = 60) -> None:
        """Wait until ``ready()``.

        Raises:
            RuntimeError: the process exited or ``timeout`` seconds passed first (with the end
                of its log).
        """
        deadline = time.monotonic() + timeout
        while not ready():
            if not self.alive or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{what} did not start:\n{tail}")
            time.sleep(0.1)

    def wait_for_log(self, text: str, what: str, timeout: float = 90) -> None:
        """Wait until ``text`` appears in the log (e.g. a worker's ``ready.``); see
        ``wait_until``."""
        self.wait_until(lambda: text in self.log.read_text(errors="replace"), what, timeout)

    def crash(self) -> list[int]:
        """SIGKILL the process and its whole group at once, as a crashed host would; returns
        the ids of its direct children (killed with it)."""
        children = child_pids(self.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        for pid in children:
            sigkill(pid)
        self.proc.wait()
        return children

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM the group, SIGKILL what is left after ``timeout`` seconds; return once the
        leader exited."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self.proc.wait(10)


def celery_worker_command(
    *,
    hostname: str,
    concurrency: int,
    include: str = "",
    queue: str = "",
    purge: bool = False,
    loglevel: str = "INFO",
) -> list[str]:
    """``celery -A agentops worker`` with ``concurrency`` pool processes named ``hostname``,
    loading the module ``include`` (extra tools or tasks) and consuming ``queue`` (default:
    the project's queues), without the cluster chatter a test does not need."""
    cmd = [sys.executable, "-m", "celery", "-A", "agentops", "worker"]
    cmd += [f"--concurrency={concurrency}", f"--loglevel={loglevel}", "--hostname", hostname]
    cmd += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    if include:
        cmd += ["-I", include]
    if queue:
        cmd += ["-Q", queue]
    if purge:
        cmd.append("--purge")
    return cmd


def celery_beat_command(*, schedule: Path) -> list[str]:
    """``celery -A agentops beat`` keeping its schedule in ``schedule``."""
    cmd = [sys.executable, "-m", "celery", "-A", "agentops", "beat", "--loglevel=INFO"]
    return [*cmd, "--schedule", str(schedule)]


def uvicorn_command(
    *, port: int = 0, fd: int | None = None, application: str = "web.asgi:application"
) -> list[str]:
    """``uvicorn <application>`` (``module:attribute``, the project's by default) as
    ``scripts/start`` serves it (HTTP and WebSocket; no lifespan, which Django's ASGI handler
    does not speak; no proxy headers: the client's address is the application's to read,
    ``agentops.addresses``) on 127.0.0.1:``port``, or on the inherited listening socket
    ``fd``."""
    cmd = [sys.executable, "-m", "uvicorn", application, "--lifespan", "off", "--no-proxy-headers"]
    return cmd + (["--fd", str(fd)] if fd is not None else ["--port", str(port)])


def daphne_command(
    *, port: int = 0, fd: int | None = None, application: str = "web.asgi:application"
) -> list[str]:
    """``daphne <application>`` (``module:attribute``, the project's by default) on
    127.0.0.1:``port``, or on the inherited listening socket ``fd``."""
    cmd = [sys.executable, "-m", "daphne"]
    cmd += ["--fd", str(fd)] if fd is not None else ["-b", "127.0.0.1", "-p", str(port)]
    return [*cmd, application]
