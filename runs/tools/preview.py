"""Tool previews on approval cards: what a waiting call would change, asked of its tool.

A tool may register a ``preview`` (``runs.tools.registry.PreviewFn``): a dry run that reads the
state the call would change and describes it before and after, never making the change.
Previews are computed when a reviewer's page is rendered, not when the approval opens: the
reviewer then sees the state the call would change at the moment they decide (a balance
spent by another call since is shown spent), the executor's transaction that opens the gate
never waits on a tool's reads, and nothing stale is stored.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from runs.tools.registry import PreviewContext, get_tool

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Preview:
    """A call's preview as shown: ``available`` False when the tool has none or it failed
    (``failed`` then says which); ``changes`` is what the tool returned (an object or
    text)."""

    available: bool
    changes: dict[str, Any] | str | None = None
    failed: bool = False


NO_PREVIEW = Preview(available=False)


def tool_preview(tool_name: str, args: dict[str, Any], ctx: PreviewContext) -> Preview:
    """The preview of a call of ``tool_name`` with ``args``: ``NO_PREVIEW`` when the tool is
    not registered or registers no preview. A preview that raises, or returns something
    other than an object or text, is logged (with the run and step) and shown as no preview:
    it never breaks the reviewer's page."""
    tool = get_tool(tool_name)
    if tool is None or tool.preview is None:
        return NO_PREVIEW
    try:
        changes = tool.preview(args, ctx)
    except Exception:
        logger.exception(
            "preview of %s failed (run %s, step %s)", tool_name, ctx.run_id, ctx.step_id
        )
        return Preview(available=False, failed=True)
    if not isinstance(changes, dict | str):
        logger.error(
            "preview of %s returned %s, not an object or text (run %s, step %s)",
            tool_name,
            type(changes).__name__,
            ctx.run_id,
            ctx.step_id,
        )
        return Preview(available=False, failed=True)
    return Preview(available=True, changes=changes)
