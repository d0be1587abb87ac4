"""REST API routes of the memory store, included under ``/api/v1/``. Item ids are matched as
UUIDs, so a malformed id is a 404 before any view runs."""

from django.urls import path

from memory import api

urlpatterns = [
    path("memory/items/", api.MemoryItemsView.as_view(), name="api-memory-items"),
    path("memory/items/<uuid:pk>/", api.MemoryItemView.as_view(), name="api-memory-item"),
    path(
        "memory/items/<uuid:pk>/history/",
        api.MemoryItemHistoryView.as_view(),
        name="api-memory-item-history",
    ),
    path("memory/search/", api.MemorySearchView.as_view(), name="api-memory-search"),
    path("memory/namespaces/", api.MemoryNamespacesView.as_view(), name="api-memory-namespaces"),
]
