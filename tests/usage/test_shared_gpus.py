"""Time-sliced GPUs: activity is the GPU's, so it is split between the pods sharing it, and
idle culling asks the notebook controller's last-activity annotation instead."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine

from jobs.models import Kind, State
from tests.usage.conftest import at
from tests.usage.test_idle import record_minutes
from usage import idle, spend, telemetry
from usage.models import GpuMinute, IdleWarning, TeamUsage, WorkloadDay
from usage.sources import GpuSample

pytestmark = pytest.mark.django_db
T = at("2026-03-02 10:00:15")


def sample(pod: str, uuid: str = "GPU-l4", activity: float = 0.8, **kw) -> GpuSample:
    return GpuSample(
        time=T,
        uuid=uuid,
        model_name="NVIDIA L4",
        hostname="l4-shared-0",
        namespace="team-vision",
        pod=pod,
        activity=activity,
        fb_used_mib=1000,
        fb_free_mib=20000,
        power_w=60.0,
        **kw,
    )


def test_rows_count_the_pods_seen_on_their_physical_gpu():
    samples = [
        sample("a"),
        sample("b"),
        sample("alone", uuid="GPU-other"),
        sample("mig-1", uuid="GPU-a100", gpu_instance="7", mig_profile="1g.10gb"),
        sample("mig-2", uuid="GPU-a100", gpu_instance="8", mig_profile="1g.10gb"),
    ]
    held, _ = telemetry.build_rows(samples, {}, {})
    sharers = {r.pod: r.sharers for r in held}
    assert sharers == {"a": 2, "b": 2, "alone": 1, "mig-1": 1, "mig-2": 1}  # MIG instances are not shared
    assert {r.pod: r.own_activity for r in held}["a"] == pytest.approx(0.4)


def test_the_gpu_activity_and_energy_of_a_shared_gpu_are_split_between_its_pods(make_workload, cast):
    a = make_workload("l4-shared", started="2026-03-02 09:00:00")
    b = make_workload("l4-shared", team=cast.nlp, user=cast.bob, started="2026-03-02 09:00:00")
    owners = {("team-vision", "a"): a.pk, ("team-vision", "b"): b.pk}
    telemetry.ingest([sample("a"), sample("b")], owners)

    assert set(GpuMinute.objects.values_list("sharers", flat=True)) == {2}
    assert set(GpuMinute.objects.values_list("activity", flat=True)) == {0.8}  # the measurement, kept as read
    for w in (a, b):
        day = WorkloadDay.objects.get(workload=w)
        assert day.mean_activity == pytest.approx(0.4) and day.peak_activity == pytest.approx(0.4)
        assert day.energy_wh == pytest.approx(60.0 / 60 / 2)
    busy = TeamUsage.objects.filter(period="hour").values_list("team_id", "busy_gpu_minutes")
    assert dict(busy) == {cast.vision.pk: pytest.approx(0.25 * 0.4), cast.nlp.pk: pytest.approx(0.25 * 0.4)}
    # used cost follows: each is charged as used for its half of the GPU's activity
    with time_machine.travel(at("2026-03-02 10:01:00"), tick=False):
        [line] = [
            ln for ln in spend.lines(at("2026-03-02 00:00:00"), at("2026-03-03 00:00:00")) if ln.workload_id == a.pk
        ]
    assert line.activity == pytest.approx(0.4)


def test_a_lone_pod_on_a_time_sliced_gpu_keeps_the_whole_reading(make_workload):
    a = make_workload("l4-shared", started="2026-03-02 09:00:00")
    telemetry.ingest([sample("a")], {("team-vision", "a"): a.pk})
    assert WorkloadDay.objects.get(workload=a).mean_activity == pytest.approx(0.8)


def shared_notebook(make_workload):
    nb = make_workload("l4-shared", kind=Kind.NOTEBOOK, started="2026-03-02 10:00:00", state=State.RUNNING)
    return nb


def record_shared(workload, start: str, end: str, activity: float) -> None:
    record_minutes(workload, start, end, activity)
    GpuMinute.objects.filter(workload=workload).update(sharers=2)


def check_at(when: str, last: dict):
    with time_machine.travel(at(when), tick=False):
        return idle.check(last_activity=lambda notebooks: {w.pk: v for w, v in last.items() if w in notebooks})


def test_a_busy_neighbour_does_not_keep_an_idle_notebook_alive(make_workload):
    nb = shared_notebook(make_workload)
    record_shared(nb, "2026-03-02 10:00:00", "2026-03-02 11:00:00", 0.9)  # the GPU is busy: the neighbour's job
    report = check_at("2026-03-02 11:00:30", {nb: at("2026-03-02 10:00:05")})  # kernels untouched since start
    assert report.warned == [nb.pk]


def test_kernel_activity_keeps_a_notebook_on_a_shared_gpu_alive(make_workload):
    nb = shared_notebook(make_workload)
    record_shared(nb, "2026-03-02 10:00:00", "2026-03-02 11:00:00", 0.0)  # the GPU looks idle
    assert check_at("2026-03-02 11:00:30", {nb: at("2026-03-02 10:40:00")}).warned == []


def test_a_shared_notebook_without_a_last_activity_annotation_is_never_called_idle(make_workload):
    nb = shared_notebook(make_workload)
    record_shared(nb, "2026-03-02 10:00:00", "2026-03-02 11:00:00", 0.0)
    assert check_at("2026-03-02 11:00:30", {}).warned == []


def test_kernel_activity_after_the_warning_cancels_the_stop_of_a_shared_notebook(make_workload):
    nb = shared_notebook(make_workload)
    record_shared(nb, "2026-03-02 10:00:00", "2026-03-02 11:00:00", 0.0)
    assert check_at("2026-03-02 11:00:30", {nb: at("2026-03-02 10:00:05")}).warned == [nb.pk]
    record_shared(nb, "2026-03-02 11:00:00", "2026-03-02 11:10:00", 0.0)
    assert check_at("2026-03-02 11:10:10", {nb: at("2026-03-02 11:05:00")}).reset == [nb.pk]
    assert not IdleWarning.objects.exists()


def test_an_unshared_minute_still_counts_its_gpu_activity(make_workload):
    nb = shared_notebook(make_workload)
    record_shared(nb, "2026-03-02 10:00:00", "2026-03-02 10:50:00", 0.0)
    record_minutes(nb, "2026-03-02 10:50:00", "2026-03-02 10:51:00", 0.7)  # alone on the GPU, and busy
    assert check_at("2026-03-02 11:00:30", {nb: at("2026-03-02 10:00:05")}).warned == []


def test_is_idle_needs_the_annotation_before_the_period_for_shared_minutes():
    rule = idle.Rule(True, 0.05, timedelta(minutes=10), timedelta(minutes=5))
    now = at("2026-03-02 11:00:00")
    minutes = {now - timedelta(minutes=i): None for i in range(1, 11)}
    since = now - rule.idle
    assert idle.is_idle(minutes, rule, since, now, since - timedelta(seconds=1))
    assert not idle.is_idle(minutes, rule, since, now, since)
    assert not idle.is_idle(minutes, rule, since, now, None)


def test_the_notebooks_last_activity_is_read_from_the_cluster(sandbox, make_workload, settings):
    """The sandbox's notebook controller keeps the annotation, like Kubeflow's culler."""
    from kubernetes import client

    nb = shared_notebook(make_workload)
    other = shared_notebook(make_workload)
    custom = client.CustomObjectsApi(sandbox.api_client())
    for w, act in ((nb, "0.0"), (other, "0.0")):
        custom.create_namespaced_custom_object(
            "kubeflow.org",
            "v1",
            "default",
            "notebooks",
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "Notebook",
                "metadata": {
                    "name": w.name,
                    "labels": {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/workload-id": str(w.pk)},
                    "annotations": {"sandbox.local/activity": act},
                },
                "spec": {"template": {"spec": {"containers": [{"name": w.name, "image": "x:1"}]}}},
            },
        )
    sandbox.settle()
    settings.KUBE_CONFIG = str(sandbox.kubeconfig_path)
    seen = idle.last_activity_from_cluster([nb])
    assert list(seen) == [nb.pk]  # only the notebooks asked about
    assert seen[nb.pk].isoformat() == "2026-01-01T00:00:00+00:00"  # set when its pod first ran
