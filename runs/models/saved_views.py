"""Saved views of the runs list: a user's named filters and sort (``runs.saved_views``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

# The longest name of a saved view, and the longest query string it keeps (characters).
MAX_VIEW_NAME = 100
MAX_VIEW_QUERY = 2000


class SavedView(models.Model):
    """One user's named view of the runs list: ``query`` is the list's query string (its
    filters and ``sort``, as ``runs.saved_views.saved_view_query`` keeps them; never a page
    cursor), opened as ``/?<query>``. Names are unique per owner; a user sees only their own
    views, which go with the user."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_run_views"
    )
    name = models.CharField(max_length=MAX_VIEW_NAME)
    query = models.CharField(max_length=MAX_VIEW_QUERY, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["owner", "name"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="savedview_owner_name_uniq")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.owner_id})"
