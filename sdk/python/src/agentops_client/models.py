"""Typed views of the API's JSON: runs, steps, approvals, and a reviewer's refusal."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# A step in one of these statuses has nothing more to wait for.
SETTLED = frozenset({"ready", "succeeded", "failed", "rejected", "refused", "skipped", "cancelled"})
# The statuses a run ends in.
FINISHED = frozenset({"succeeded", "failed", "cancelled", "compensated", "compensation_failed"})
# Refused calls: by a reviewer (``rejected``), or before any gate because the run's grants or
# a deny rule do not allow them (``refused``, error type ``not_granted``).
REFUSED = frozenset({"rejected", "refused"})


@dataclass(frozen=True)
class Step:
    """One step: ``id``, ``index``, ``tool``, the final ``args`` (a reviewer may have edited
    them), ``executor`` (``server`` | ``client``), ``status`` (``pending``,
    ``awaiting_approval``, ``ready``, ``queued``, ``running``, ``waiting_retry``,
    ``succeeded``, ``failed``, ``rejected``, ``refused``, ``skipped``, ``cancelled``),
    ``attempts``, the
    ``idempotency_key`` to run it under, ``result``, ``tool_error`` (the result is the tool's
    error answer), ``error`` and the full JSON (``raw``)."""

    id: int
    index: int
    tool: str
    args: dict[str, Any]
    executor: str
    status: str
    attempts: int
    idempotency_key: str
    result: Any
    error: dict[str, Any] | None
    raw: dict[str, Any] = field(repr=False, compare=False)
    tool_error: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Step:
        return cls(
            id=data["id"],
            index=data["index"],
            tool=data["tool"],
            args=data.get("args") or {},
            executor=data.get("executor", "server"),
            status=data["status"],
            attempts=data.get("attempts", 0),
            idempotency_key=data.get("idempotency_key", ""),
            result=data.get("result"),
            error=data.get("error"),
            raw=data,
            tool_error=bool(data.get("tool_error", False)),
        )

    @property
    def replayed(self) -> bool:
        """Whether this is a replayed answer to a repeated request: the step as it was then."""
        return bool(self.raw.get("_idempotent_replayed"))

    @property
    def settled(self) -> bool:
        """Whether the step waits for nothing more: ready for its client, or finished."""
        return self.status in SETTLED


@dataclass(frozen=True)
class Run:
    """One run: ``id``, ``status``, ``goal``, ``project`` (its slug), ``error``, totals
    ``usage_tokens`` (tokens) and ``cost_usd`` (USD), its ``steps`` and the full JSON (``raw``)."""

    id: str
    status: str
    goal: str
    project: str
    error: dict[str, Any] | None
    usage_tokens: int
    cost_usd: float
    steps: list[Step]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Run:
        return cls(
            id=str(data["id"]),
            status=data["status"],
            goal=data.get("goal", ""),
            project=data.get("project", ""),
            error=data.get("error"),
            usage_tokens=int(data.get("usage_tokens") or 0),
            cost_usd=float(data.get("cost_usd") or 0),
            steps=[Step.from_json(s) for s in data.get("steps") or []],
            raw=data,
        )

    @property
    def finished(self) -> bool:
        """Whether the run has ended: succeeded, failed, cancelled, compensated or its
        compensation failed (a failed or cancelled run may be compensated later: it runs
        again, its compensating steps only)."""
        return self.status in FINISHED


@dataclass(frozen=True)
class Approval:
    """A pending (or decided) approval request: ``id``, ``run_id``, ``step_id``, ``status``,
    ``tool``, ``args`` and the full JSON (``raw``)."""

    id: int
    run_id: str
    step_id: int | None
    status: str
    tool: str
    args: dict[str, Any]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Approval:
        raw_step = data.get("step")
        step: dict[str, Any] = raw_step if isinstance(raw_step, dict) else {}
        run = data.get("run")
        run_id = run.get("id") if isinstance(run, dict) else (run or data.get("run_id"))
        return cls(
            id=data["id"],
            run_id=str(run_id),
            step_id=step.get("id"),
            status=data.get("status", ""),
            tool=step.get("tool", ""),
            args=step.get("args") or {},
            raw=data,
        )


@dataclass(frozen=True)
class Rejected:
    """A reviewer refused a call (or its approval expired), or its run's policy did before any
    gate: what the agent gets instead of a result. ``type`` is ``rejected``,
    ``approval_expired`` or ``not_granted`` (outside the run's grants, or a deny rule);
    ``reason`` the reviewer's comment or the policy's reason; ``reviewer`` their username."""

    type: str
    reason: str
    message: str
    reviewer: str = ""

    @classmethod
    def from_error(cls, error: dict[str, Any] | None) -> Rejected:
        error = error or {}
        return cls(
            type=str(error.get("type", "rejected")),
            reason=str(error.get("reason", "")),
            message=str(error.get("message", "")),
            reviewer=str(error.get("reviewer", "")),
        )

    def __str__(self) -> str:
        who = f" by {self.reviewer}" if self.reviewer else ""
        return f"Rejected{who}: {self.reason or self.message}"


@dataclass(frozen=True)
class AgentState:
    """One version of a run's agent state: ``version`` (0: the state the run started with),
    the ``state`` object, its ``schema_version``, and ``etag``, the version's entity tag to
    make the next write against (sent as ``If-Match``). ``upgraded_from`` is the schema
    version the state is stored under when the server shows it upgraded to a newer version of
    the run's state schema (None: as stored)."""

    version: int
    state: dict[str, Any]
    schema_version: int
    etag: str
    upgraded_from: int | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any], etag: str) -> AgentState:
        return cls(
            version=data["version"],
            state=data["state"],
            schema_version=data.get("schema_version", 1),
            etag=etag,
            upgraded_from=data.get("upgraded_from"),
        )


@dataclass(frozen=True)
class Session:
    """One session (a user's conversation with an agent over many runs): ``id``, the
    client's ``external_id``, the end user's ``subject``, ``metadata``, ``status`` (``open``
    | ``closed``), ``message_count``, ``context_tokens`` (tokens), ``runs`` (ids, oldest
    first) and the full JSON (``raw``)."""

    id: str
    external_id: str
    subject: str
    metadata: dict[str, Any]
    status: str
    message_count: int
    context_tokens: int
    runs: list[str]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Session:
        return cls(
            id=data["id"],
            external_id=data["external_id"],
            subject=data.get("subject", ""),
            metadata=data.get("metadata") or {},
            status=data["status"],
            message_count=data.get("message_count", 0),
            context_tokens=data.get("context_tokens", 0),
            runs=list(data.get("runs") or []),
            raw=data,
        )
