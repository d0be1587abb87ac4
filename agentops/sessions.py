"""``SESSION_ENGINE = "agentops.sessions"``: Django's database sessions (same table, same
rows), a session read with one statement of raw SQL.

Every page request reads its session; the ORM took several times longer to build the query
(``Session.objects.get(session_key=..., expire_date__gt=now)``) than PostgreSQL to answer it.
Writing, creating and deleting sessions are Django's own.
"""

from __future__ import annotations

from typing import Any

from django.contrib.sessions.backends import db
from django.db import connections, router
from django.utils import timezone

_LOAD = "SELECT session_data FROM django_session WHERE session_key = %s AND expire_date > %s"


class SessionStore(db.SessionStore):
    """Django's ``db.SessionStore`` whose ``load`` reads the row with raw SQL."""

    def load(self) -> dict[str, Any]:
        """The session's data; ``{}`` (and no session key, as Django's) when there is no
        unexpired session of this key."""
        db = connections[router.db_for_read(self.model)]
        # The time as the backend stores it (SQLite: text in Django's own format).
        now = db.ops.adapt_datetimefield_value(timezone.now())
        with db.cursor() as cursor:
            cursor.execute(_LOAD, [self.session_key, now])
            row = cursor.fetchone()
        if row is None:
            self._session_key = None
            return {}
        return self.decode(row[0])
