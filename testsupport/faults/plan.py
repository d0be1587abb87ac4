"""The size and timing of one harness run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FaultPlan:
    """The size of one harness run.

    ``runs`` plan runs of ``steps`` steps each; ``kills`` SIGKILLs of worker processes, of which
    one in ``parent_kill_every`` hits a worker's main process; ``redis_restarts`` and
    ``pg_terminations`` as described in the module docstring; ``hang_share`` the share of steps
    that call the hang tool; ``seed`` makes the workload and the fault schedule repeatable (the
    timing of processes is not). Lease margin and requeue age (seconds) are passed to the
    processes as ``AGENTOPS_LEASE_MARGIN_SECONDS`` and ``AGENTOPS_REQUEUE_AFTER_SECONDS``.
    """

    runs: int = 12
    steps: int = 4
    kills: int = 12
    redis_restarts: int = 1
    pg_terminations: int = 3
    seed: int = 1
    parent_kill_every: int = 6
    hang_share: float = 0.1
    lease_margin_seconds: int = 2
    requeue_after_seconds: int = 3
    settle_seconds: float = 60.0
