"""Page routes of the control room, and ``/metrics`` for Prometheus."""

from django.urls import path

from fleet import views

urlpatterns = [
    path("overview/", views.overview, name="fleet-overview"),
    path("overview/data/", views.overview_data, name="fleet-overview-data"),
    path("workers/", views.workers, name="fleet-workers"),
    path("workers/live/", views.workers_live, name="fleet-workers-live"),
    path("workers/tasks/<int:record_id>/resend/", views.task_resend, name="fleet-task-resend"),
    path("metrics", views.metrics, name="metrics"),
]
