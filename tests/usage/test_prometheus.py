"""The Prometheus source against a real Prometheus scraping the sandbox every second."""

from __future__ import annotations

import time

import pytest

from usage import telemetry
from usage.models import GpuMinute
from usage.sources import PrometheusSource, ScrapeSource


def test_prometheus_and_direct_scraping_give_the_same_attributed_samples(
    sandbox, gpu_pod, prometheus, make_workload, cast
):
    nb = make_workload("a100-80gb-1g.10gb", started="2026-03-02 09:00:00")
    train = make_workload("h100-80gb", team=cast.nlp, user=cast.bob, started="2026-03-02 09:00:00")
    gpu_pod("nb-0", "a100-80gb-1g.10gb", "team-vision", nb.pk, activity=0.03)
    gpu_pod("train-0", "h100-80gb", "team-nlp", train.pk, activity=0.91)
    sandbox.settle()
    sandbox.advance(30)

    source = PrometheusSource(prometheus, window_seconds=60)
    deadline = time.monotonic() + 20
    while True:  # until Prometheus has scraped the pods' series a few times
        samples = {s.pod: s for s in source.collect() if s.pod}
        if len(samples) == 2 and min(s.samples for s in samples.values()) >= 2:
            break
        assert time.monotonic() < deadline, f"Prometheus never had both pods: {sorted(samples)}"
        time.sleep(0.5)

    scraped = {s.pod: s for s in ScrapeSource([f"{sandbox.url}/metrics"]).collect() if s.pod}
    for pod in ("nb-0", "train-0"):
        p, d = samples[pod], scraped[pod]
        assert (p.device, p.namespace, p.mig_profile, p.model_name, p.hostname) == (
            d.device,
            d.namespace,
            d.mig_profile,
            d.model_name,
            d.hostname,
        )
        assert p.activity == pytest.approx(d.activity)
        assert p.fb_used_mib == pytest.approx(d.fb_used_mib)
    assert samples["nb-0"].mig_profile == "1g.10gb" and samples["nb-0"].activity == pytest.approx(0.03)

    # The whole tick through Prometheus: the portal's pods attributed through their labels.
    with _cluster(sandbox) as cluster:
        report = telemetry.tick(source, lambda sel: cluster.list("v1", "Pod", label_selector=sel))
    assert report.minute_rows == 2 and report.unattributed == 0
    assert dict(GpuMinute.objects.values_list("pod", "workload_id")) == {"nb-0": nb.pk, "train-0": train.pk}
    assert GpuMinute.objects.get(pod="train-0").samples >= 2  # one row summarises the window's scrapes


def _cluster(sandbox):
    from django.test import override_settings

    from jobs.kube.client import Cluster

    with override_settings(KUBE_CONFIG=str(sandbox.kubeconfig_path), KUBE_CONTEXT=""):
        return Cluster.from_settings()
