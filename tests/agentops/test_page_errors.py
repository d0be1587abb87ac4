"""Page actions' domain errors as messages (``agentops.page_errors.page_action``): one
translation for every page view, as the API has one exception handler."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.contrib.messages.storage.fallback import FallbackStorage
from django.contrib.sessions.backends.signed_cookies import SessionStore
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.test import RequestFactory
from django_fsm import ConcurrentTransition, TransitionNotAllowed

from agentops.errors import Conflict, InvalidInput
from agentops.page_errors import Refused, page_action


class Thing:
    status = "finished"


def _request() -> HttpRequest:
    request = RequestFactory().post("/act/")
    request.session = SessionStore()
    request._messages = FallbackStorage(request)  # type: ignore[attr-defined]
    return request


def _back(request: HttpRequest, **kwargs: Any) -> HttpResponse:
    return HttpResponse(f"back {kwargs}", status=302)


def _raising(exc: Exception) -> Any:
    @page_action("Cannot act", _back, says={KeyError: "No such key."})
    def view(request: HttpRequest, thing_id: int) -> HttpResponse:
        raise exc

    return view


@pytest.mark.parametrize(
    ("exc", "text"),
    [
        (InvalidInput("reason too long", field="reason"), "Cannot act: reason too long."),
        (Conflict("already decided"), "Cannot act: already decided."),
        (PermissionDenied("only reviewers may decide"), "Cannot act: only reviewers may decide."),
        (
            TransitionNotAllowed("no", object=Thing(), method=None),
            "Cannot act: it is finished now.",
        ),
        (ConcurrentTransition("raced"), "Cannot act: it changed meanwhile. Please try again."),
        (Refused("Give a reason. Nothing was changed."), "Give a reason. Nothing was changed."),
        (KeyError("k"), "No such key."),
    ],
)
def test_a_domain_error_is_a_message_and_the_way_back(exc: Exception, text: str) -> None:
    request = _request()
    response = _raising(exc)(request, thing_id=7)
    assert (response.status_code, response.content) == (302, b"back {'thing_id': 7}")
    assert [str(message) for message in get_messages(request)] == [text]


def test_a_missing_object_is_a_404_and_other_errors_are_raised_on() -> None:
    with pytest.raises(Http404):
        _raising(ObjectDoesNotExist())(_request(), thing_id=1)
    with pytest.raises(ZeroDivisionError):
        _raising(ZeroDivisionError())(_request(), thing_id=1)
    # A PermissionDenied without a reason is the 403 Django answers.
    with pytest.raises(PermissionDenied):
        _raising(PermissionDenied())(_request(), thing_id=1)


def test_a_successful_action_is_its_own_answer() -> None:
    @page_action("Cannot act", _back)
    def view(request: HttpRequest) -> HttpResponse:
        return HttpResponse("done")

    request = _request()
    assert view(request).content == b"done"
    assert not list(get_messages(request))
