from django.urls import path

from usage import api

urlpatterns = [
    path("usage/", api.UsageView.as_view(), name="usage-api"),
    path("usage/export.csv", api.ExportView.as_view(), name="usage-export"),
    path("usage/rightsizing/", api.RightsizingView.as_view(), name="usage-rightsizing"),
    path("usage/cluster/", api.ClusterView.as_view(), name="usage-cluster"),
]
