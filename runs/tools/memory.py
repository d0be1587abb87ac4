"""Memory writes as tools (issue 33, item 2): ``memory.put`` and ``memory.delete`` write the
run's project's memory store (``memory.services``) as a step, so risk rules can hold a write
for a reviewer like any tool call (e.g. a rule on ``memory.*`` with the condition
``namespace[0] == "policies"``), which defends against memory poisoning: an agent persuaded
to store something false or harmful. Approved, the write happens with the run and step as
its provenance; rejected, nothing is written and the reason reaches the agent as the
step's error.

Their preview shows a reviewer the item as stored now beside the proposed one, and the
changes (``templates/memory/_approval_diff.html``).
"""

from __future__ import annotations

from typing import Any

from agentops.actors import Actor
from agentops.errors import InvalidInput, PreconditionFailed
from memory import selectors, services
from memory.diffs import value_diff
from memory.models import MemoryItem
from memory.provenance import Provenance
from runs.models import Step
from runs.tools.registry import PreviewContext, ToolContext, ToolError, register

_NAMESPACE = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": 200},
    "minItems": 1,
    "maxItems": 20,
}
_KEY = {"type": "string", "minLength": 1, "maxLength": 500}
_IF_MATCH = {
    "type": "string",
    "description": "The item's ETag the write was made against, or *; another version "
    "fails the step (precondition_failed).",
}


def _step(ctx: ToolContext | PreviewContext) -> Step:
    return Step.objects.select_related("run__project", "run__session", "requested_by").get(
        pk=ctx.step_id
    )


def _provenance(step: Step) -> Provenance:
    run = step.run
    return Provenance(
        run_id=run.pk,
        step_id=step.pk,
        step_index=step.index,
        session_id=run.session_id,
        subject=run.session.subject if run.session is not None else "",
    )


def _actor(step: Step) -> Actor:
    """Who asked for the write: the step's requester (the agent's client), else the worker."""
    if step.requested_by is not None:
        return Actor.for_user(step.requested_by, via_api=True)
    return Actor.worker()


def _refused(exc: InvalidInput | PreconditionFailed) -> ToolError:
    kind = "precondition_failed" if isinstance(exc, PreconditionFailed) else "invalid_input"
    return ToolError(exc.message, retryable=False, type=kind)


def _current(ctx: PreviewContext, args: dict[str, Any]) -> MemoryItem | None:
    if ctx.project_id is None:
        return None
    try:
        return selectors.memory_get(
            project_id=ctx.project_id, namespace=args["namespace"], key=args["key"]
        )
    except (MemoryItem.DoesNotExist, InvalidInput):
        return None


def _proposal(
    ctx: PreviewContext, args: dict[str, Any], proposed: dict[str, Any] | None
) -> dict[str, Any]:
    """What a reviewer sees: the item now (``current``: its value, None when absent) beside
    ``proposed`` (None: deleted), and the changes between them."""
    item = _current(ctx, args)
    current = item.value if item is not None else None
    if proposed is None:
        effect = "Deletes" if item is not None else "Would delete (nothing there now)"
    else:
        effect = "Replaces" if item is not None else "Creates"
    return {
        "effect": effect,
        "namespace": list(args["namespace"]),
        "key": args["key"],
        "current_item": str(item.pk) if item is not None else None,
        "current_version": item.version if item is not None else None,
        "current": current,
        "proposed": proposed,
        "changes": [change.__dict__ for change in value_diff(current, proposed)],
    }


def _put_preview(args: dict[str, Any], ctx: PreviewContext) -> dict[str, Any]:
    return _proposal(ctx, args, args["value"])


def _delete_preview(args: dict[str, Any], ctx: PreviewContext) -> dict[str, Any]:
    return _proposal(ctx, args, None)


@register(
    "memory.put",
    description="Store a memory item: a JSON object under a namespace (list of labels) and "
    "key, in the run's project; replaces the item there.",
    schema={
        "type": "object",
        "properties": {
            "namespace": _NAMESPACE,
            "key": _KEY,
            "value": {"type": "object"},
            "text": {"type": "string", "maxLength": services.MAX_TEXT_CHARS},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": services.MAX_TAGS},
            "ttl_seconds": {"type": "integer", "minimum": 1},
            "if_match": _IF_MATCH,
        },
        "required": ["namespace", "key", "value"],
        "additionalProperties": False,
    },
    side_effects=True,
    idempotent=True,
    max_attempts=1,
    preview=_put_preview,
    key_args=("namespace", "key"),
)
def memory_put(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Write the item (``memory.services.memory_put``) with the run and step as provenance;
    returns ``{"namespace", "key", "version", "etag", "created"}``.

    Raises:
        ToolError: a value the store refuses (``invalid_input``) or an ``if_match`` that is
            not the current version (``precondition_failed``); never retried.
    """
    step = _step(ctx)
    try:
        written = services.memory_put(
            actor=_actor(step),
            project=step.run.project,
            namespace=args["namespace"],
            key=args["key"],
            value=args["value"],
            text=args.get("text"),
            tags=args.get("tags"),
            ttl_seconds=args.get("ttl_seconds"),
            if_match=args.get("if_match"),
            provenance=_provenance(step),
        )
    except (InvalidInput, PreconditionFailed) as exc:
        raise _refused(exc) from exc
    item = written.item
    return {
        "namespace": list(item.namespace),
        "key": item.key,
        "version": item.version,
        "etag": item.etag,
        "created": written.created,
    }


@register(
    "memory.delete",
    description="Delete a memory item of the run's project, by namespace and key, saying why.",
    schema={
        "type": "object",
        "properties": {
            "namespace": _NAMESPACE,
            "key": _KEY,
            "reason": {"type": "string", "maxLength": services.MAX_REASON_CHARS},
            "if_match": _IF_MATCH,
        },
        "required": ["namespace", "key"],
        "additionalProperties": False,
    },
    side_effects=True,
    idempotent=True,
    max_attempts=1,
    preview=_delete_preview,
    key_args=("namespace", "key"),
)
def memory_delete(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Delete the item (``memory.services.memory_delete``); returns ``{"deleted": bool,
    "version"}`` (``deleted`` false: there was no live item).

    Raises:
        ToolError: as ``memory_put``.
    """
    step = _step(ctx)
    try:
        kept = services.memory_delete(
            actor=_actor(step),
            project=step.run.project,
            namespace=args["namespace"],
            key=args["key"],
            reason=args.get("reason", ""),
            if_match=args.get("if_match"),
            provenance=_provenance(step),
        )
    except (InvalidInput, PreconditionFailed) as exc:
        raise _refused(exc) from exc
    return {"deleted": kept is not None, "version": kept.version if kept is not None else None}
