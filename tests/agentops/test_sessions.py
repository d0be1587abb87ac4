"""``agentops.sessions``: Django's database sessions, read with raw SQL, as Django reads them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.sessions.backends import db
from django.contrib.sessions.models import Session
from django.utils import timezone

from agentops.sessions import SessionStore

pytestmark = pytest.mark.django_db


def test_the_engine_is_in_use() -> None:
    assert settings.SESSION_ENGINE == "agentops.sessions"


def test_a_saved_session_loads_as_djangos() -> None:
    saved = SessionStore()
    saved.update({"_auth_user_id": "7", "cart": [1, "two", {"three": 3}]})
    saved.save()
    key = saved.session_key
    ours, django = SessionStore(key), db.SessionStore(key)
    assert ours.load() == django.load() == {"_auth_user_id": "7", "cart": [1, "two", {"three": 3}]}
    assert ours.session_key == key


@pytest.mark.parametrize("expired", [True, False])
def test_an_expired_or_unknown_session_loads_empty_and_loses_its_key(expired: bool) -> None:
    saved = SessionStore()
    saved["n"] = 1
    saved.save()
    key = saved.session_key if expired else "k" * 32
    Session.objects.filter(session_key=saved.session_key).update(
        expire_date=timezone.now() - timedelta(seconds=1)
    )
    ours, django = SessionStore(key), db.SessionStore(key)
    assert ours.load() == django.load() == {}
    assert ours.session_key is None
    assert django.session_key is None
