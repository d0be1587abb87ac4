"""Domain errors of a page's action as a message on the page it returns to: the pages' one
translation, as ``agentops.api.exception_handler`` is the API's (issue 32, item 4).

A page action (a POST view: cancel a run, decide an approval, re-send a task) calls a service
and redirects; when the service refuses, the person gets an error message saying why and
nothing changed. ``page_action`` wraps such a view so that it need not catch anything itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from django.contrib import messages
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django_fsm import ConcurrentTransition, TransitionNotAllowed

from agentops.errors import Conflict, InvalidInput

View = Callable[..., HttpResponse]


class Refused(Exception):
    """A page action refused by the view itself (a missing reason, text that is not JSON):
    ``message`` is the whole sentence the person reads."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def refusal_text(exc: Exception, refused: str) -> str | None:
    """What a person reads when a page action fails with ``exc``: ``refused`` (what could not
    be done, "Cannot cancel") and why, or None when ``exc`` is no domain error.

    ``InvalidInput`` gives its message, ``Conflict`` and a ``PermissionDenied`` with a text
    theirs, ``TransitionNotAllowed`` the object's current status, ``ConcurrentTransition`` a
    request to try again; ``Refused`` is the whole text."""
    if isinstance(exc, Refused):
        return exc.message
    if isinstance(exc, InvalidInput):
        return f"{refused}: {exc.message}."
    if isinstance(exc, Conflict) or (isinstance(exc, PermissionDenied) and str(exc)):
        return f"{refused}: {exc}."
    if isinstance(exc, TransitionNotAllowed):
        current = getattr(exc.object, "status", None)
        return f"{refused}: it is {current} now." if current else f"{refused}: not now."
    if isinstance(exc, ConcurrentTransition):
        return f"{refused}: it changed meanwhile. Please try again."
    return None


def page_action(
    refused: str,
    back: Callable[..., HttpResponse],
    *,
    says: Mapping[type[Exception], str] | None = None,
    missing: str | None = None,
) -> Callable[[View], View]:
    """Decorate a page action ``view(request, **kwargs)``: a domain error it raises becomes
    an error message (``refusal_text``, or the text ``says`` gives for the error's class,
    formatted with the view's ``kwargs``: ``"Request {approval_id} does not exist."``) and
    the answer is ``back(request, **kwargs)``, the page to return to. An
    ``ObjectDoesNotExist`` is a 404, as on every page, unless ``missing`` gives the message
    to show instead. Other errors are raised on.

    Raises (from the decorated view):
        Http404: the view looked up an object that does not exist (``missing`` not given).
    """

    def decorate(view: View) -> View:
        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                return view(request, *args, **kwargs)
            except Exception as exc:  # domain errors are told apart below; others re-raised
                text = next(
                    (
                        said.format(**kwargs)
                        for kind, said in (says or {}).items()
                        if isinstance(exc, kind)
                    ),
                    None,
                )
                if text is None and isinstance(exc, ObjectDoesNotExist):
                    if missing is None:
                        raise Http404("not found") from None
                    text = missing
                text = text or refusal_text(exc, refused)
                if text is None:
                    raise
            messages.error(request, text)
            return back(request, *args, **kwargs)

        return wrapped

    return decorate
