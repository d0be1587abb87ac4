"""The faults of the harness: SIGKILLs of worker processes, Redis restarts that lose every
queued message, and terminated database connections, injected while the workload runs."""

from __future__ import annotations

import contextlib
import random
import time
from collections import Counter
from datetime import datetime

from django.db import connection
from django.utils import timezone

from runs.models import Step, StepStatus
from testsupport.cluster import Cluster
from testsupport.faults.plan import FaultPlan
from testsupport.faults.workload import open_runs, settled_share
from testsupport.processes import child_pids, sigkill

# Faults are spread over the first 85% of the workload's progress (share of settled steps),
# so the last ones still land while runs execute.
FAULT_SPAN = 0.85


class FaultInjector:
    """Injects the faults of a ``FaultPlan`` into a ``Cluster`` and counts them.

    ``kill_times`` maps (step id, attempt number) to when the harness killed the process that
    held that attempt's lease, for the recovery-time figure.
    """

    def __init__(self, cluster: Cluster, plan: FaultPlan, rng: random.Random):
        self.cluster = cluster
        self.plan = plan
        self.rng = rng
        self.counts: Counter[str] = Counter()
        self.kill_times: dict[tuple[int, int], datetime] = {}

    def schedule(self) -> list[str]:
        """The faults to inject: one of each kind first, in a random order, then the rest
        shuffled. A plain shuffle could leave a rare kind (3 Redis restarts among 200 kills,
        1 among 10 in the suite's plans) to the end, after every run had finished: one seed's
        runs met no Redis restart and no terminated connection once commits got faster."""
        parents = self.plan.kills // self.plan.parent_kill_every if self.plan.kills else 0
        kinds = ["kill_parent"] * parents + ["kill_child"] * (self.plan.kills - parents)
        kinds += ["redis_restart"] * self.plan.redis_restarts
        kinds += ["pg_terminate"] * self.plan.pg_terminations
        first = list(dict.fromkeys(kinds))
        for kind in first:
            kinds.remove(kind)
        self.rng.shuffle(first)
        self.rng.shuffle(kinds)
        return first + kinds

    def run(self) -> None:
        """Inject every scheduled fault, each once the workload has progressed far enough,
        after a random pause of up to 0.3 s; stop early if every run ends first."""
        kinds = self.schedule()
        for i, kind in enumerate(kinds):
            target = FAULT_SPAN * i / len(kinds)
            waited = time.monotonic()
            # Wait for progress, but not forever: a stalled workload gets its faults anyway.
            while settled_share() < target and time.monotonic() - waited < 20:
                self.cluster.supervise()
                if not open_runs():
                    return
                time.sleep(0.1)
            time.sleep(self.rng.uniform(0, 0.3))
            self.cluster.supervise()
            if not open_runs():
                return
            getattr(self, kind)()

    def _leases(self) -> dict[int, tuple[int, int]]:
        """Running steps by the pid of the process holding their lease: (step id, attempt)."""
        leases = {}
        for step_id, owner, attempt in Step.objects.filter(status=StepStatus.RUNNING).values_list(
            "pk", "lease_owner", "attempts"
        ):
            with contextlib.suppress(ValueError):
                leases[int(owner.rsplit(":", 1)[-1])] = (step_id, attempt)
        return leases

    def _note_kill(self, pids: list[int], leases: dict[int, tuple[int, int]]) -> None:
        now = timezone.now()
        for pid in pids:
            if pid in leases:
                self.kill_times[leases[pid]] = now

    def kill_child(self) -> None:
        """SIGKILL one pool process, four times in five one that holds a running step."""
        deadline = time.monotonic() + 30
        while True:
            pool = [pid for w in self.cluster.workers if w.alive for pid in child_pids(w.pid)]
            if pool or time.monotonic() > deadline:
                break
            self.cluster.supervise()
            time.sleep(0.2)  # the workers are (re)starting
        if not pool:
            return
        leases = self._leases()
        busy = [pid for pid in pool if pid in leases]
        pid = self.rng.choice(busy if busy and self.rng.random() < 0.8 else pool)
        sigkill(pid)
        self._note_kill([pid], leases)
        self.counts["kill_child"] += 1

    def kill_parent(self) -> None:
        """SIGKILL a worker's main process and its pool, then start a replacement worker."""
        i = self.rng.randrange(len(self.cluster.workers))
        leases = self._leases()
        children = self.cluster.workers[i].crash()
        self._note_kill(children, leases)
        self.cluster.workers[i] = self.cluster.start_worker()
        self.counts["kill_parent"] += 1

    def redis_restart(self) -> None:
        """SIGKILL Redis, wait 0.5-2 s, start it again empty on the same port."""
        self.cluster.redis.crash()
        time.sleep(self.rng.uniform(0.5, 2.0))
        self.cluster.redis.start()
        self.counts["redis_restart"] += 1

    def pg_terminate(self) -> None:
        """``pg_terminate_backend`` every other client connection to this database."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND backend_type = 'client backend'"
            )
            (terminated,) = cursor.fetchone() or (0,)
        self.counts["pg_terminate"] += 1
        self.counts["pg_connections_terminated"] += terminated
