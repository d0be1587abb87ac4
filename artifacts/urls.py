"""Page routes of artifacts."""

from django.urls import path

from artifacts import views

urlpatterns = [
    path(
        "artifacts/<uuid:artifact_id>/preview/",
        views.artifact_preview,
        name="artifact-preview",
    ),
]
