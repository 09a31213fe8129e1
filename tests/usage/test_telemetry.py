"""Samples → attributed minute rows → rollups; the scrape source against the sandbox."""

from __future__ import annotations

import pytest
from django.db.models import Sum

from tests.usage.conftest import at
from usage import sources, tasks, telemetry
from usage.models import DeviceReading, GpuMinute, TeamUsage, WorkloadDay
from usage.sources import GpuSample

H100 = "NVIDIA H100 80GB HBM3"


def sample(pod="p1", activity=0.5, fb=1024.0, minute="2026-03-02 10:00:20", uuid="GPU-aaa", **kw):
    return GpuSample(
        time=at(minute),
        uuid=uuid,
        model_name=H100,
        hostname="h100-0",
        namespace="team-vision",
        pod=pod,
        activity=activity,
        fb_used_mib=fb,
        fb_free_mib=80000 - fb,
        power_w=300.0,
        **kw,
    )


def rollups():
    return (
        list(
            WorkloadDay.objects.values_list(
                "workload_id", "day", "device_minutes", "activity_minutes", "peak_fb_mib", "energy_wh"
            ).order_by("workload_id")
        ),
        list(
            TeamUsage.objects.values_list(
                "period", "team_key", "gpu_class", "device_minutes", "gpu_minutes", "busy_gpu_minutes"
            ).order_by("period", "team_key")
        ),
    )


def test_ingesting_the_same_minute_twice_counts_it_once(make_workload):
    w = make_workload("h100-80gb", started="2026-03-02 09:00:00")
    owners = {("team-vision", "p1"): w.pk}
    telemetry.ingest([sample()], owners)
    first = rollups()
    telemetry.ingest([sample()], owners)
    assert rollups() == first
    assert GpuMinute.objects.count() == 1
    (wd,) = WorkloadDay.objects.all()
    assert (wd.device_minutes, wd.activity_minutes, wd.peak_fb_mib) == (1, 0.5, 1024)
    assert wd.energy_wh == pytest.approx(5.0)  # 300 W for a minute


def test_a_corrected_minute_replaces_its_numbers_in_the_rollups(make_workload):
    w = make_workload("h100-80gb", started="2026-03-02 09:00:00")
    owners = {("team-vision", "p1"): w.pk}
    telemetry.ingest([sample(activity=0.5)], owners)
    telemetry.ingest([sample(activity=0.25, minute="2026-03-02 10:00:50")], owners)
    telemetry.ingest([sample(activity=1.0, minute="2026-03-02 10:01:05")], owners)
    wd = WorkloadDay.objects.get()
    assert (wd.device_minutes, wd.activity_minutes) == (2, 1.25)
    hour = TeamUsage.objects.get(period="hour", team_key=w.team_id)
    assert (hour.device_minutes, hour.gpu_minutes, hour.busy_gpu_minutes) == (2, 2.0, 1.25)
    day = TeamUsage.objects.get(period="day", team_key=w.team_id)
    assert day.start == at("2026-03-02 00:00:00") and day.busy_gpu_minutes == 1.25


def test_pods_the_portal_does_not_manage_are_unattributed_cluster_usage(make_workload):
    telemetry.ingest(
        [sample(pod="someone-else", activity=0.8), sample(pod="", uuid="GPU-free", activity=0.0)],
        {},
        snapshot_at=at("2026-03-02 10:00:30"),
    )
    row = GpuMinute.objects.get()
    assert (row.workload_id, row.team_id, row.pod) == (None, None, "someone-else")
    assert not WorkloadDay.objects.exists()
    assert set(TeamUsage.objects.values_list("team_key", "team_id", "busy_gpu_minutes")) == {(0, None, 0.8)}
    # The free GPU is in the latest readings only.
    assert sorted(DeviceReading.objects.values_list("device", "pod")) == [("GPU-aaa", "someone-else"), ("GPU-free", "")]


def test_labels_of_other_exporter_versions_and_scrape_setups_are_understood():
    text = (
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",uuid="GPU-1",modelName="Tesla T4",hostname="n1",'
        'exported_namespace="team-x",exported_pod="nb-0",namespace="gpu-operator",pod="dcgm-exporter-abc"} 37\n'
        "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
        'DCGM_FI_DEV_FB_USED{gpu="0",uuid="GPU-1",modelName="Tesla T4",hostname="n1",'
        'exported_namespace="team-x",exported_pod="nb-0",namespace="gpu-operator",pod="dcgm-exporter-abc"} 2048\n'
    )
    (s,) = sources.parse_exposition(text, at("2026-03-02 10:00:00"))
    assert (s.uuid, s.hostname, s.namespace, s.pod, s.activity, s.fb_used_mib) == (
        "GPU-1",
        "n1",
        "team-x",
        "nb-0",
        0.37,
        2048.0,
    )
    assert telemetry.gpu_class_of("NVIDIA-A100-SXM4-80GB", "1g.10gb") == "A100-80GB/1g.10gb"


def test_the_sampler_reads_the_sandbox_and_attributes_pods_by_their_workload_label(
    sandbox, gpu_pod, make_workload, cast, settings
):
    h100 = make_workload("h100-80gb", started="2026-03-02 09:00:00")
    mig = make_workload("a100-80gb-1g.10gb", team=cast.nlp, user=cast.bob, started="2026-03-02 09:00:00")
    shared = make_workload("l4-shared", started="2026-03-02 09:00:00")
    gpu_pod("h100-pod", "h100-80gb", "team-vision", h100.pk, activity=0.42)
    gpu_pod("mig-pod", "a100-80gb-1g.10gb", "team-nlp", mig.pk, activity=0.07)
    gpu_pod("shared-pod", "l4-shared", "team-vision", shared.pk, activity=0.2)
    gpu_pod("stray", "h100-80gb", "research", None, activity=0.9)
    sandbox.settle()
    sandbox.advance(30)
    settings.KUBE_CONFIG = str(sandbox.kubeconfig_path)
    settings.PORTAL_METRICS_SOURCE = "scrape"
    settings.PORTAL_DCGM_URLS = []  # development default: the sandbox's /metrics, from the kubeconfig

    result = tasks.sample_gpus()
    assert result["rows"] == 4 and result["unattributed"] == 1
    # The demo's exporter runs with KUBERNETES_VIRTUAL_GPUS (cluster_setup: recommended), and
    # upstream then reports only the held devices of a node where any pod holds one: h100-0
    # (2 held), a100-mig-0 (1), l4-shared-0 (1), plus the idle h100-1 (8) and l4-shared-1 (4)
    # and the DRA node (8, its own exporter without virtual GPUs).
    assert result["samples"] == 24

    rows = {r.pod: r for r in GpuMinute.objects.all()}
    assert rows["h100-pod"].workload_id == h100.pk and rows["h100-pod"].activity == pytest.approx(0.42)
    assert rows["h100-pod"].gpu_class == "H100-80GB" and rows["h100-pod"].hostname.startswith("h100-")
    assert rows["mig-pod"].team_id == cast.nlp.pk and rows["mig-pod"].gpu_class == "A100-80GB/1g.10gb"
    assert rows["mig-pod"].share == pytest.approx(1 / 7) and "/" in rows["mig-pod"].device
    assert rows["mig-pod"].fb_total_mib < 10 * 1024  # a slice's memory, not the A100's
    assert rows["shared-pod"].share == pytest.approx(1 / 4)
    assert rows["stray"].workload_id is None
    assert DeviceReading.objects.count() == 24
    assert DeviceReading.objects.filter(pod="").count() == 20
    vision_hour = TeamUsage.objects.filter(period="hour", team_key=cast.vision.pk).aggregate(b=Sum("busy_gpu_minutes"))
    assert vision_hour["b"] == pytest.approx(0.42 + 0.2 / 4)


def test_the_source_comes_from_settings(settings, tmp_path):
    settings.PORTAL_METRICS_SOURCE = "prometheus"
    settings.PORTAL_PROMETHEUS_URL = "http://prometheus.monitoring:9090"
    src = sources.from_settings()
    assert isinstance(src, sources.PrometheusSource) and src.url == "http://prometheus.monitoring:9090"
    settings.PORTAL_METRICS_SOURCE = "scrape"
    settings.PORTAL_DCGM_URLS = "http://n1:9400/metrics, http://n2:9400/metrics"
    assert sources.from_settings().urls == ["http://n1:9400/metrics", "http://n2:9400/metrics"]
    settings.PORTAL_METRICS_SOURCE = "statsd"
    with pytest.raises(Exception, match="PORTAL_METRICS_SOURCE"):
        sources.from_settings()
