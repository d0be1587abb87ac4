"""What the client raises: one class per kind of refusal, all ``AgentOpsError``."""

from __future__ import annotations

from typing import Any


class AgentOpsError(Exception):
    """The server refused a request: ``status`` (HTTP), ``detail`` (its message) and, for
    bad input, the ``field`` it names."""

    def __init__(self, status: int, detail: str, field: str = "", body: Any = None) -> None:
        super().__init__(f"{status}: {detail}" + (f" ({field})" if field else ""))
        self.status, self.detail, self.field, self.body = status, detail, field, body


class BadRequest(AgentOpsError):
    """400: malformed input; ``field`` names the part."""


class NotAuthenticated(AgentOpsError):
    """401: no valid token."""


class PermissionDenied(AgentOpsError):
    """403: the token's user may not do this."""


class NotFound(AgentOpsError):
    """404: no such run, step or approval."""


class Conflict(AgentOpsError):
    """409: the current status forbids this (e.g. a step not ready for a result)."""


class PreconditionFailed(AgentOpsError):
    """412: a state write was made against a version that is no longer current; ``version``
    is the current one (read the state again and redo the change)."""

    @property
    def version(self) -> int | None:
        """The current version, as the server said."""
        found = self.body.get("version") if isinstance(self.body, dict) else None
        return found if isinstance(found, int) else None


class TooLarge(AgentOpsError):
    """413: the new state is over the server's size limit (``detail`` names it)."""


class IdempotencyMismatch(AgentOpsError):
    """422: an ``Idempotency-Key`` reused with a different request."""


class ServerError(AgentOpsError):
    """5xx after every retry."""


class StepFailed(Exception):
    """A step ended ``failed``, ``cancelled`` or ``skipped``: ``step`` is the step as read."""

    def __init__(self, step: Any) -> None:
        super().__init__(f"step {step.index} ({step.tool}) is {step.status}: {step.error}")
        self.step = step


class ToolFailed(Exception):
    """The local function of a client step raised; its error was reported to agentops and
    the original exception is the ``__cause__``."""


def error_for(status: int, body: Any) -> AgentOpsError:
    """The exception for a refused response (``status``, parsed JSON ``body``)."""
    detail, field = str(body), ""
    if isinstance(body, dict):
        detail = str(body.get("detail", body))
        field = str(body.get("field", ""))
    kind: type[AgentOpsError] = {
        400: BadRequest,
        401: NotAuthenticated,
        403: PermissionDenied,
        404: NotFound,
        409: Conflict,
        412: PreconditionFailed,
        413: TooLarge,
        422: IdempotencyMismatch,
    }.get(status, ServerError if status >= 500 else AgentOpsError)
    return kind(status, detail, field, body)
