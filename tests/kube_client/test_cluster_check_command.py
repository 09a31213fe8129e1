"""`manage.py cluster_check` against the scripted API server; the sandbox run is in test_sandbox.py."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from jobs.kube.kinds import checked_kinds
from tests.kube_client.fake_api import FakeApi, Reply, error


def write_kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        f"""
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"""
    )
    return path


@pytest.fixture
def kube_settings(settings, tmp_path, fake_api):
    settings.KUBE_CONFIG = str(write_kubeconfig(tmp_path / "kubeconfig", fake_api.url))
    settings.KUBE_CONTEXT = ""
    settings.KUBE_REQUEST_TIMEOUT = 2
    return settings


def serve_discovery(fake_api: FakeApi, *, without: tuple[str, ...] = ()) -> None:
    documents: dict[str, list[str]] = {}
    for info in checked_kinds():
        if info.kind not in without:
            documents.setdefault(info.group_version_path, []).append(info.plural)

    def answer(request):
        if request.path == "/version":
            return Reply(200, {"major": "1", "minor": "34", "gitVersion": "v1.34.1"})
        if request.path in documents:
            return Reply(200, {"kind": "APIResourceList", "resources": [{"name": p} for p in documents[request.path]]})
        return error(404, "NotFound", "the server could not find the requested resource")

    fake_api.fallback = answer


def test_it_prints_the_url_version_and_every_kind_installed(kube_settings, fake_api):
    serve_discovery(fake_api)
    out = io.StringIO()

    call_command("cluster_check", stdout=out)

    text = out.getvalue()
    assert f"cluster: {fake_api.url}: reachable, Kubernetes v1.34.1" in text
    assert "MISSING" not in text
    assert "all kinds installed" in text
    for info in checked_kinds():
        assert info.kind in text


def test_it_fails_and_names_a_missing_required_kind(kube_settings, fake_api):
    serve_discovery(fake_api, without=("TrainJob", "Workload"))
    out = io.StringIO()

    with pytest.raises(
        CommandError, match=r"required kinds missing: TrainJob \(trainer.kubeflow.org/v1alpha1\)"
    ) as caught:
        call_command("cluster_check", stdout=out)

    assert caught.value.returncode == 1
    assert "missing required: TrainJob" in out.getvalue()
    assert "missing optional: Workload" in out.getvalue()


def test_a_missing_optional_kind_alone_passes(kube_settings, fake_api):
    serve_discovery(fake_api, without=("Workload", "LocalQueue"))
    out = io.StringIO()

    call_command("cluster_check", stdout=out)

    assert "missing optional: LocalQueue, Workload" in out.getvalue()


def test_an_unreachable_cluster_fails_with_the_reason(settings, tmp_path):
    settings.KUBE_CONFIG = str(write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9"))
    settings.KUBE_CONTEXT = ""
    out = io.StringIO()

    with pytest.raises(CommandError, match="unreachable") as caught:
        call_command("cluster_check", stdout=out)

    assert caught.value.returncode == 1
    assert "http://127.0.0.1:9: unreachable" in out.getvalue()


def test_a_missing_kubeconfig_fails_naming_the_file(settings, tmp_path):
    settings.KUBE_CONFIG = str(tmp_path / "no-such-kubeconfig")

    with pytest.raises(CommandError, match="no-such-kubeconfig") as caught:
        call_command("cluster_check", stdout=io.StringIO())

    assert caught.value.returncode == 1


def test_an_add_on_object_the_role_may_not_read_is_reported_and_the_rest_still_checked(kube_settings, fake_api):
    serve_discovery(fake_api)
    discovery = fake_api.fallback

    def answer(request):
        if request.path == "/api/v1/namespaces/volcano-system/configmaps/volcano-scheduler-configmap":
            return error(403, "Forbidden", 'configmaps "volcano-scheduler-configmap" is forbidden')
        return discovery(request)

    fake_api.fallback = answer
    out = io.StringIO()

    call_command("cluster_check", stdout=out)

    text = out.getvalue()
    assert "UNKNOWN    ConfigMap volcano-system/volcano-scheduler-configmap" in text
    assert "cannot read it: 403 Forbidden" in text
    assert "NOT FOUND  ConfigMap kserve/inferenceservice-config" in text
    read = {r.path for r in fake_api.requests if "/namespaces/" in r.path or "clusterstoragecontainers" in r.path}
    assert read == {
        "/api/v1/namespaces/kserve/configmaps/inferenceservice-config",
        "/apis/serving.kserve.io/v1alpha1/clusterstoragecontainers/default",
        "/api/v1/namespaces/knative-serving/configmaps/config-features",
        "/api/v1/namespaces/volcano-system/configmaps/volcano-scheduler-configmap",
        "/api/v1/namespaces/kueue-system/configmaps/kueue-manager-config",
        "/apis/apps/v1/namespaces/gpu-operator/daemonsets/nvidia-dcgm-exporter",
        "/apis/apps/v1/namespaces/gpu-operator/daemonsets/nvidia-dcgm-exporter-dra",
    }
    with pytest.raises(CommandError, match=r"configuration finding\(s\) need attention") as caught:
        call_command("cluster_check", "--strict", stdout=io.StringIO())
    assert caught.value.returncode == 1


def test_the_namespaces_looked_in_can_be_given(kube_settings, fake_api):
    serve_discovery(fake_api)
    call_command(
        "cluster_check",
        "--kserve-namespace",
        "kubeflow",
        "--dcgm-exporter",
        "monitoring/dcgm-exporter",
        "--dcgm-exporter-dra",
        "monitoring/nvidia-dcgm-exporter-dra",
        stdout=io.StringIO(),
    )
    paths = {r.path for r in fake_api.requests}
    assert "/api/v1/namespaces/kubeflow/configmaps/inferenceservice-config" in paths
    assert "/apis/apps/v1/namespaces/monitoring/daemonsets/dcgm-exporter" in paths
    assert "/apis/apps/v1/namespaces/monitoring/daemonsets/nvidia-dcgm-exporter-dra" in paths


@pytest.mark.parametrize(
    "value, message",
    [
        ("nvidia-dcgm-exporter", "--dcgm-exporter must be NAMESPACE/NAME"),
        ("gpu-operator/my-exporter", "the DaemonSet must be named nvidia-dcgm-exporter, dcgm-exporter or nvidia-"),
    ],
)
@pytest.mark.parametrize("option", ["--dcgm-exporter", "--dcgm-exporter-dra"])
def test_a_dcgm_exporter_the_role_cannot_read_is_refused_up_front(kube_settings, fake_api, value, message, option):
    message = message.replace("--dcgm-exporter", option)
    with pytest.raises(CommandError, match=message):
        call_command("cluster_check", option, value, stdout=io.StringIO())
    assert fake_api.requests == []


def test_the_client_reads_only_the_configuration_objects_it_is_granted(kube_settings):
    from jobs.kube.client import Cluster
    from jobs.kube.kinds import UnknownKind

    with Cluster.from_settings() as cluster, pytest.raises(UnknownKind, match="CONFIG_OBJECTS"):
        cluster.read_config("v1", "ConfigMap", "aws-auth", "kube-system")
