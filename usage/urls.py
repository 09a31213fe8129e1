from django.urls import path

from usage import portal_metrics, views

urlpatterns = [
    path("usage/", views.dashboard, name="usage-dashboard"),
    path("usage/cluster/", views.cluster, name="usage-cluster"),
    path("usage/workloads/<int:pk>/", views.workload_usage, name="usage-workload"),
    path("usage/estimate/", views.estimate, name="usage-estimate"),
    # Prometheus scrapes this without a session: see usage.portal_metrics for its protection.
    path("metrics", portal_metrics.metrics_view, name="portal-metrics"),
]
