"""Browser pages for workloads and presets (mounted at the site root by portal/urls.py)."""

from django.urls import path

from jobs import views

urlpatterns = [
    path("workloads/", views.workload_list, name="workload-list"),
    path("workloads/new/<str:kind>/", views.workload_new, name="workload-new"),
    path("workloads/preview/", views.workload_preview, name="workload-preview"),
    path("workloads/<int:pk>/", views.workload_detail, name="workload-detail"),
    path("workloads/<int:pk>/live/", views.workload_live, name="workload-live"),
    path("workloads/<int:pk>/logs/", views.workload_logs, name="workload-logs"),
    path("workloads/<int:pk>/manifests/", views.workload_manifests, name="workload-manifests"),
    path("cluster-banner/", views.cluster_banner, name="cluster-banner"),
    path("workloads/<int:pk>/stop/", views.workload_stop, name="workload-stop"),
    path("workloads/<int:pk>/rollout/", views.workload_rollout, name="workload-rollout"),
    path("workloads/<int:pk>/promote/", views.workload_promote, name="workload-promote"),
    path("workloads/<int:pk>/rollback/", views.workload_rollback, name="workload-rollback"),
    path("workloads/<int:pk>/start/", views.workload_start, name="workload-start"),
    path("workloads/<int:pk>/delete/", views.workload_delete, name="workload-delete"),
    path("workloads/<int:pk>/save-preset/", views.workload_save_preset, name="workload-save-preset"),
    path("presets/", views.preset_list, name="preset-list"),
    path("presets/<int:pk>/delete/", views.preset_delete, name="preset-delete"),
]
