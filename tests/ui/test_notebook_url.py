"""A notebook's URL answers only when Jupyter serves under NB_PREFIX (issue 11).

The builder starts non-Kubeflow images with ``--ServerApp.base_url=$(NB_PREFIX)`` and gives
every notebook a readiness probe on ``<prefix>/api``; the sandbox's kubelet answers that
probe only where the image really serves (sandbox.jupyter). So a notebook that would open on
a 404 never shows as running, and a regression in the builder fails here.
"""

import pytest

from jobs import lifecycle
from jobs.kube.client import Cluster
from jobs.kube.manifests import cluster_objects, workload_objects
from jobs.models import State
from jobs.reconcile import reconcile
from sandbox.jupyter import readiness_failure, served_base_url

pytestmark = pytest.mark.django_db

KUBEFLOW_IMAGE = "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-pytorch-cuda-full:v1.10.0"
DOCKER_STACKS_IMAGE = "quay.io/jupyter/base-notebook:2024-12-02"


def run_notebook(cluster, quotas, name: str, **request):
    workload = lifecycle.request_workload(
        quotas.alice, quotas.vision, {"kind": "notebook", "name": name, "offering": "cpu", **request}
    )
    with Cluster.from_settings() as kube:
        kube.apply_all(cluster_objects())
        assert lifecycle.submit(workload.pk, kube)
        cluster.settle()
        reconcile(kube)
        pod = kube.get("v1", "Pod", f"{name}-0", "team-vision")
    workload.refresh_from_db()
    return workload, pod


def ready(pod) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"]["conditions"])


def test_the_default_notebook_image_is_a_kubeflow_image_that_serves_under_nb_prefix(cluster, quotas, settings):
    assert settings.NOTEBOOK_IMAGES[0] == KUBEFLOW_IMAGE
    workload, pod = run_notebook(cluster, quotas, "kf-default", image=settings.NOTEBOOK_IMAGES[0])
    container = pod["spec"]["containers"][0]
    assert "args" not in container and "command" not in container  # the image's own start
    assert ready(pod)
    assert workload.state == State.RUNNING
    assert workload.url.endswith("/notebook/team-vision/kf-default/")


def test_another_jupyter_image_is_started_under_nb_prefix_by_the_portal(cluster, quotas):
    workload, pod = run_notebook(cluster, quotas, "stacks", image=DOCKER_STACKS_IMAGE)
    container = pod["spec"]["containers"][0]
    assert "--ServerApp.base_url=$(NB_PREFIX)" in container["args"]
    assert served_base_url(container) == "/notebook/team-vision/stacks"
    assert ready(pod)
    assert workload.state == State.RUNNING


def test_a_notebook_whose_jupyter_serves_elsewhere_is_not_ready_and_says_why(cluster, quotas, client):
    # The user's own start, without the prefix: Jupyter serves at "/", the URL would be a 404.
    workload, pod = run_notebook(cluster, quotas, "at-root", image=DOCKER_STACKS_IMAGE, command=["jupyter", "lab"])
    assert not ready(pod)
    assert workload.state == State.SUBMITTED
    assert workload.url == ""
    assert workload.cluster_message == (
        "Started but not ready (containers with unready status: [at-root]); the Kubernetes events say why."
    )
    client.force_login(quotas.alice)
    page = client.get(f"/workloads/{workload.pk}/").content.decode()
    assert "Readiness probe failed: HTTP probe failed with statuscode: 404" in page


def test_the_users_own_start_under_the_prefix_runs(cluster, quotas):
    workload, pod = run_notebook(
        cluster,
        quotas,
        "own-start",
        image=DOCKER_STACKS_IMAGE,
        command=["jupyter", "lab", "--ServerApp.base_url=$(NB_PREFIX)"],
    )
    assert ready(pod)
    assert workload.state == State.RUNNING


def test_a_builder_that_forgets_the_base_url_is_caught_by_the_sandbox(cluster, quotas):
    """The regression the probe exists for: the same objects without the base_url argument."""
    workload = lifecycle.request_workload(
        quotas.alice,
        quotas.vision,
        {"kind": "notebook", "name": "regressed", "offering": "cpu", "image": DOCKER_STACKS_IMAGE},
    )
    objects = workload_objects(lifecycle.validate(lifecycle.request_data(workload), quotas.vision, workload.pk))
    notebook = next(o for o in objects if o["kind"] == "Notebook")
    container = notebook["spec"]["template"]["spec"]["containers"][0]
    container["args"] = [a for a in container["args"] if "base_url" not in a]
    with Cluster.from_settings() as kube:
        kube.apply_all([*cluster_objects(), *objects])
        cluster.settle()
        pod = kube.get("v1", "Pod", "regressed-0", "team-vision")
    assert not ready(pod)


@pytest.mark.parametrize(
    ("container", "base"),
    [
        ({"image": KUBEFLOW_IMAGE, "env": [{"name": "NB_PREFIX", "value": "/notebook/ns/nb"}]}, "/notebook/ns/nb"),
        ({"image": "kubeflownotebookswg/jupyter-scipy:v1.8.0", "env": [{"name": "NB_PREFIX", "value": "/p"}]}, "/p"),
        ({"image": DOCKER_STACKS_IMAGE, "env": [{"name": "NB_PREFIX", "value": "/notebook/ns/nb"}]}, "/"),
        ({"image": KUBEFLOW_IMAGE, "command": ["jupyter", "lab"], "env": [{"name": "NB_PREFIX", "value": "/p"}]}, "/"),
        ({"image": "x:1", "args": ["--NotebookApp.base_url", "/a/b/"]}, "/a/b"),
        (
            {
                "image": "x:1",
                "args": ["--ServerApp.base_url=$(NB_PREFIX)"],
                "env": [{"name": "NB_PREFIX", "value": "/q"}],
            },
            "/q",
        ),
    ],
)
def test_the_sandbox_knows_where_an_image_serves_jupyter(container, base):
    assert served_base_url(container) == base


def test_only_notebook_pods_are_judged_by_the_jupyter_model():
    container = {"image": "x:1", "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}}}
    assert readiness_failure({"metadata": {"labels": {"app": "x"}}}, container) == ""
    assert readiness_failure({"metadata": {"labels": {"notebook-name": "nb"}}}, container).endswith("404")
