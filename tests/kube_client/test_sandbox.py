"""jobs.kube.client against the sandbox cluster, through the same kubeconfig path the portal uses.

One sandbox serves the module (starting one costs more than all the tests together);
each test works in a namespace of its own and consumes the faults it injects.
"""

from __future__ import annotations

import io
import itertools
import time
from collections.abc import Iterator

import pytest
from django.core.management import CommandError, call_command

from jobs.kube.client import FIELD_MANAGER, Cluster
from jobs.kube.errors import Conflict, Forbidden, Invalid, Throttled, Transient, WatchExpired
from sandbox.testing import running_sandbox
from tests.conftest import DEMO_PROFILE, SHARED_REFERENCE

LABELS = {"app.kubernetes.io/managed-by": "gpu-portal"}
_namespaces = itertools.count(1)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[object]:
    crd_dir = SHARED_REFERENCE if SHARED_REFERENCE.is_dir() else None
    with running_sandbox(DEMO_PROFILE, crd_dir=crd_dir) as handle:
        yield handle


@pytest.fixture
def cluster(sandbox) -> Iterator[Cluster]:
    with Cluster(sandbox.api_client(), request_timeout=5) as cluster:
        yield cluster


@pytest.fixture
def namespace(cluster: Cluster) -> str:
    name = f"kc-{next(_namespaces)}"
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": LABELS}})
    return name


def service_account(name: str, namespace: str, **labels: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace, "labels": {**LABELS, **labels}},
    }


def network_policy(namespace: str, **annotations: str) -> dict:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "team-isolation", "namespace": namespace, "labels": LABELS, "annotations": annotations},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": {}}]}]},
    }


# -- writes --------------------------------------------------------------------------


def test_apply_creates_and_applying_again_changes_nothing(cluster, namespace):
    created = cluster.apply(network_policy(namespace))
    again = cluster.apply(network_policy(namespace))

    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert again["metadata"]["uid"] == created["metadata"]["uid"]
    managers = {entry["manager"] for entry in again["metadata"]["managedFields"]}
    assert managers == {FIELD_MANAGER}


def test_apply_updates_a_changed_field_and_drops_one_no_longer_applied(cluster, namespace):
    first = cluster.apply(network_policy(namespace, **{"portal/owner": "alice", "portal/note": "x"}))

    second = cluster.apply(network_policy(namespace, **{"portal/owner": "bob"}))

    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    assert second["metadata"]["annotations"] == {"portal/owner": "bob"}
    stored = cluster.get("networking.k8s.io/v1", "NetworkPolicy", "team-isolation", namespace)
    assert stored["metadata"]["annotations"] == {"portal/owner": "bob"}


def test_merge_patch_changes_one_annotation_that_a_later_apply_keeps(cluster, namespace):
    cluster.apply(network_policy(namespace, **{"portal/owner": "alice"}))

    cluster.merge_patch(
        "networking.k8s.io/v1",
        "NetworkPolicy",
        "team-isolation",
        {"metadata": {"annotations": {"stop": "yes"}}},
        namespace,
    )
    reapplied = cluster.apply(network_policy(namespace, **{"portal/owner": "alice"}))

    assert reapplied["metadata"]["annotations"] == {"portal/owner": "alice", "stop": "yes"}


def test_delete_then_get_returns_none_and_a_second_delete_returns_false(cluster, namespace):
    cluster.apply(service_account("runner", namespace))

    assert cluster.delete("v1", "ServiceAccount", "runner", namespace) is True
    assert cluster.get("v1", "ServiceAccount", "runner", namespace) is None
    assert cluster.delete("v1", "ServiceAccount", "runner", namespace) is False


# -- reads ---------------------------------------------------------------------------


def test_list_pages_through_a_label_selection_across_namespaces(sandbox, namespace):
    other = f"kc-{next(_namespaces)}"
    api_client = sandbox.api_client()
    requests = []
    call_api = api_client.call_api

    def counting(*args, **kwargs):
        requests.append(args[1])
        return call_api(*args, **kwargs)

    api_client.call_api = counting
    cluster = Cluster(api_client, page_size=5)
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    for i in range(7):
        cluster.apply(service_account(f"sa-{i}", namespace, batch="paging"))
        cluster.apply(service_account(f"sa-{i}", other, batch="paging"))
    cluster.apply(service_account("unlabelled", namespace))
    requests.clear()

    found = cluster.list("v1", "ServiceAccount", label_selector={"batch": "paging"})

    assert sorted((o["metadata"]["namespace"], o["metadata"]["name"]) for o in found) == sorted(
        (ns, f"sa-{i}") for ns in (namespace, other) for i in range(7)
    )
    assert all(o["kind"] == "ServiceAccount" for o in found)
    assert len(requests) == 3  # 14 objects, 5 per page
    assert found.resource_version
    assert len(cluster.list("v1", "ServiceAccount", label_selector={"batch": "paging"}, namespace=other)) == 7


def test_watch_yields_added_and_modified_after_the_list_resource_version(cluster, namespace):
    before = cluster.list("v1", "ServiceAccount", label_selector={"watch": namespace}, namespace=namespace)
    assert before == []
    cluster.apply(service_account("watched", namespace, watch=namespace))
    cluster.apply(service_account("watched", namespace, watch=namespace, step="2"))

    seen = []
    events = cluster.watch(
        "v1",
        "ServiceAccount",
        label_selector={"watch": namespace},
        resource_version=before.resource_version,
        timeout_seconds=5,
        namespace=namespace,
    )
    for kind, obj in events:
        if kind != "BOOKMARK":
            seen.append((kind, obj["metadata"]["name"], obj["metadata"]["labels"].get("step")))
        if len(seen) == 2:
            events.close()
            break

    assert seen == [("ADDED", "watched", None), ("MODIFIED", "watched", "2")]


def test_a_watch_from_a_compacted_resource_version_raises_watch_expired(sandbox, cluster, namespace):
    if not hasattr(sandbox, "compact"):
        pytest.skip("the sandbox handle has no compact() to expire old resourceVersions")
    old = cluster.list("v1", "ServiceAccount", label_selector="x=y").resource_version
    cluster.apply(service_account("after", namespace))
    sandbox.compact()

    with pytest.raises(WatchExpired):
        events = cluster.watch("v1", "ServiceAccount", label_selector="x=y", resource_version=old, timeout_seconds=2)
        list(events)


def test_a_cut_watch_ends_and_watching_again_from_the_last_resource_version_misses_nothing(sandbox, cluster, namespace):
    selector = {"cut": namespace}
    listed = cluster.list("v1", "ServiceAccount", label_selector=selector, namespace=namespace)
    events = cluster.watch(
        "v1",
        "ServiceAccount",
        label_selector=selector,
        resource_version=listed.resource_version,
        timeout_seconds=30,
        namespace=namespace,
    )
    cluster.apply(service_account("first", namespace, cut=namespace))
    # Reading one event proves the stream is live before it is cut.
    kind, first = next(events)
    assert (kind, first["metadata"]["name"]) == ("ADDED", "first")

    sandbox.cut_watches()
    started = time.monotonic()
    try:
        rest = list(events)
    except Transient:
        rest = []
    assert time.monotonic() - started < 5
    assert rest == []

    cluster.apply(service_account("second", namespace, cut=namespace))
    resumed = cluster.watch(
        "v1",
        "ServiceAccount",
        label_selector=selector,
        resource_version=first["metadata"]["resourceVersion"],
        timeout_seconds=5,
        namespace=namespace,
    )
    kind, second = next(resumed)
    resumed.close()
    assert (kind, second["metadata"]["name"]) == ("ADDED", "second")


# -- faults through the client ---------------------------------------------------------


def test_injected_conflicts_are_retried_until_the_apply_succeeds(sandbox, cluster, namespace):
    sandbox.inject_fault(409, count=3, verb="apply", kind="serviceaccounts")

    applied = cluster.apply(service_account("contended", namespace))

    assert applied["metadata"]["name"] == "contended"


def test_conflicts_beyond_the_retry_budget_raise_conflict(sandbox, cluster, namespace):
    sandbox.inject_fault(409, count=4, verb="apply", kind="serviceaccounts")

    with pytest.raises(Conflict) as caught:
        cluster.apply(service_account("contended", namespace))

    assert caught.value.status == 409
    assert "injected fault" in caught.value.message


def test_an_injected_422_is_invalid_with_its_cause(sandbox, cluster, namespace):
    sandbox.inject_fault(422, verb="apply", kind="serviceaccounts")

    with pytest.raises(Invalid) as caught:
        cluster.apply(service_account("rejected", namespace))

    assert caught.value.causes == [("metadata.annotations", "Invalid value: injected validation fault")]
    assert str(caught.value) == "metadata.annotations: Invalid value: injected validation fault"


def test_an_injected_429_is_throttled_with_its_retry_after(sandbox, cluster, namespace):
    sandbox.inject_fault(429, verb="apply", kind="serviceaccounts", retry_after=7)

    with pytest.raises(Throttled) as caught:
        cluster.apply(service_account("busy", namespace))

    assert caught.value.retry_after == 7


def test_an_injected_500_is_transient(sandbox, cluster, namespace):
    sandbox.inject_fault(500, verb="list", kind="serviceaccounts")

    with pytest.raises(Transient) as caught:
        cluster.list("v1", "ServiceAccount", label_selector="a=b", namespace=namespace)

    assert caught.value.status == 500


def test_a_request_hanging_past_the_timeout_is_transient(sandbox, namespace):
    sandbox.inject_fault(None, verb="get", kind="serviceaccounts", hang_seconds=3)
    with Cluster(sandbox.api_client(), request_timeout=1) as impatient:
        started = time.monotonic()
        with pytest.raises(Transient) as caught:
            impatient.get("v1", "ServiceAccount", "anything", namespace)

    assert caught.value.reason == "Timeout"
    assert time.monotonic() - started < 2.5


def test_a_trainjob_with_an_unknown_field_is_invalid_naming_the_field(shared_reference, cluster, namespace):
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "typo", "namespace": namespace, "labels": LABELS},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 1, "numNodez": 2}},
    }

    with pytest.raises(Invalid) as caught:
        cluster.apply(trainjob)

    assert [field for field, _ in caught.value.causes] == ["spec.trainer.numNodez"]
    assert "spec.trainer.numNodez" in str(caught.value)


# -- cluster check -------------------------------------------------------------------


def test_check_finds_every_kind_the_portal_needs(cluster):
    result = cluster.check()

    assert result.ok, result
    assert result.server_version.startswith("v1.")
    assert result.missing_required == [] and result.missing_optional == []


def test_cluster_check_command_prints_every_kind_installed(sandbox, settings):
    settings.KUBE_CONFIG = str(sandbox.kubeconfig_path)
    settings.KUBE_CONTEXT = ""
    out = io.StringIO()

    call_command("cluster_check", stdout=out)

    text = out.getvalue()
    assert f"cluster: {sandbox.url}" in text.replace("/:", ":")
    assert "MISSING" not in text
    assert "all kinds installed" in text


# -- pods, events, logs ----------------------------------------------------------------


def test_a_scheduled_pod_is_found_by_label_and_has_events_and_logs(sandbox, cluster, namespace):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "worker", "namespace": namespace, "labels": {**LABELS, "workload": "w1"}},
        "spec": {
            "containers": [
                {"name": "main", "image": "docker.io/pytorch/pytorch:2.5.1", "resources": {"requests": {"cpu": "1"}}}
            ]
        },
    }
    cluster.apply(pod)
    sandbox.settle()

    (found,) = cluster.pods_for(namespace, {"workload": "w1"})
    assert found["metadata"]["name"] == "worker"
    assert found["status"]["phase"] == "Running"

    reasons = [e["reason"] for e in cluster.events_for(namespace, "worker")]
    assert "Scheduled" in reasons
    assert reasons.index("Scheduled") < reasons.index("Started")

    sandbox.advance(120)
    logs = cluster.pod_logs(namespace, "worker", tail_lines=3)
    assert 1 <= len(logs.splitlines()) <= 3


def test_logs_of_a_pod_still_waiting_are_invalid_with_the_reason(cluster, namespace):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "stuck", "namespace": namespace},
        # More CPUs than any node has: the pod stays Pending.
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "4000"}}}]},
    }
    cluster.apply(pod)

    with pytest.raises(Invalid, match="waiting to start"):
        cluster.pod_logs(namespace, "stuck")


def test_a_pod_over_the_namespace_gpu_quota_is_forbidden_with_the_quota_message(cluster, namespace):
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "gpus", "namespace": namespace, "labels": LABELS},
            "spec": {"hard": {"requests.nvidia.com/gpu": "1"}},
        }
    )
    gpu = {"nvidia.com/gpu": "2"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "greedy", "namespace": namespace},
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": gpu, "limits": gpu}}]},
    }

    with pytest.raises(Forbidden) as caught:
        cluster.apply(pod)

    assert caught.value.transient is False
    assert "exceeded quota: gpus" in caught.value.message


def test_cluster_check_reports_the_add_on_configuration_or_that_it_is_not_found(sandbox, settings):
    """The sandbox may or may not serve the add-ons' configuration objects (ConfigMaps and the
    dcgm-exporter DaemonSet are seeded per cluster profile): each is either checked or
    reported as not found, and only --strict turns findings into a failure."""
    settings.KUBE_CONFIG = str(sandbox.kubeconfig_path)
    settings.KUBE_CONTEXT = ""
    out = io.StringIO()

    call_command("cluster_check", stdout=out)

    text = out.getvalue()
    section = text.split("add-on configuration (what the portal needs of it):\n", 1)[1]
    lines = [line for line in section.splitlines() if line.startswith("  ") and "fix: " not in line]
    for source in (
        "ConfigMap kserve/inferenceservice-config",
        "ConfigMap knative-serving/config-features",
        "ConfigMap volcano-system/volcano-scheduler-configmap",
        "ConfigMap kueue-system/kueue-manager-config",
        "DaemonSet gpu-operator/nvidia-dcgm-exporter",
    ):
        statuses = {line.split()[0] for line in lines if source in line}
        assert statuses and statuses <= {"ok", "FIX", "NOT", "UNKNOWN"}, (source, statuses)
    attention = "configuration finding(s) need attention" in text
    assert attention or "configuration: all ok" in text
    if attention:
        with pytest.raises(CommandError, match="configuration finding"):
            call_command("cluster_check", "--strict", stdout=io.StringIO())
    else:
        call_command("cluster_check", "--strict", stdout=io.StringIO())
