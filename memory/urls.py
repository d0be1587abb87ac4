"""Page routes of the memory store."""

from django.urls import path

from memory import views

urlpatterns = [
    path("memory/", views.memory_browse, name="memory-browse"),
    path("memory/items/<uuid:item_id>/", views.memory_item, name="memory-item"),
    path(
        "memory/items/<uuid:item_id>/delete/",
        views.memory_item_delete,
        name="memory-item-delete",
    ),
]
