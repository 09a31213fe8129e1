"""A failed training run says why, end to end: sandbox pods -> reconcile -> the row -> API and page.

The sandbox's outcome hint (``sandbox.local/outcome``) makes one pod fail the way the
kubelet reports it (OOMKilled 137, Error 1, or DisruptionTarget for a preemption), the
reconcile derives the failure from the pods while they exist and stores it on the workload,
and the workload page and ``/api/v1/workloads/<id>/`` show the class, exit code, pod and node.
"""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from jobs import lifecycle
from jobs.models import State, Workload
from jobs.reconcile import reconcile
from quotas.models import Quota
from tests.jobs.conftest import training

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_celery")]


@pytest.fixture
def quota(cast, catalog):
    Quota.objects.create(team=cast.vision, gpu_class="H100-80GB", guaranteed=8, limit=16)


def converge(sandbox, kube, rounds=3):
    for _ in range(rounds):
        sandbox.settle()
        reconcile(kube)


def run_until_done(cast, sandbox, kube, outcome: str, **fields) -> Workload:
    annotations = {"sandbox.local/duration-seconds": "60", "sandbox.local/outcome": outcome}
    w = lifecycle.request_workload(cast.alice, cast.vision, training(annotations=annotations, **fields))
    assert lifecycle.submit(w.pk, kube)
    converge(sandbox, kube)
    assert Workload.objects.get(pk=w.pk).state == State.RUNNING
    sandbox.advance(90)
    converge(sandbox, kube)
    return Workload.objects.get(pk=w.pk)


def pods_of(sandbox, w: Workload) -> dict[str, dict]:
    core = k8s.CoreV1Api(sandbox.api_client())
    pods = core.list_namespaced_pod("team-vision", label_selector=f"gpu-portal.io/workload-id={w.pk}").items
    return {p.metadata.name: sandbox.api_client().sanitize_for_serialization(p) for p in pods}


@pytest.mark.parametrize(
    ("outcome", "failure_class", "exit_code", "reason", "says"),
    [
        ("oom", "oom", 137, "OOMKilled", "ran out of memory (OOMKilled, exit code 137)"),
        ("error", "error", 1, "Error", "failed (Error, exit code 1)"),
        (
            "preempted",
            "preempted",
            143,
            "PreemptionByScheduler",
            "was preempted (PreemptionByScheduler, exit code 143)",
        ),
    ],
)
def test_a_failed_trainjob_stores_which_pod_failed_where_and_why(
    cast, quota, sandbox, kube, outcome, failure_class, exit_code, reason, says
):
    w = run_until_done(cast, sandbox, kube, outcome)
    assert w.state == State.FAILED
    pods = pods_of(sandbox, w)
    failed = pods[w.failure["pod"]]  # a real pod of the run, on the node it ran on
    assert w.failure["node"] == failed["spec"]["nodeName"] != ""
    assert (w.failure["class"], w.failure["exit_code"], w.failure["reason"]) == (failure_class, exit_code, reason)
    assert w.failure["container"] == "node"
    assert says in w.state_reason and w.failure["pod"] in w.state_reason
    # The other node was stopped by its controller, not counted as the cause.
    others = [p for name, p in pods.items() if name != w.failure["pod"]]
    assert [p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] for p in others] == [143]
    assert w.events.filter(to_state=State.FAILED, message__contains=says).exists()


def test_a_failed_volcano_job_on_a_dra_offering_says_why_too(cast, quota, sandbox, kube):
    w = run_until_done(cast, sandbox, kube, "oom", offering="h100-80gb-dra")
    assert w.applied_manifests[-1]["kind"] == "Job"
    assert w.state == State.FAILED
    assert (w.failure["class"], w.failure["exit_code"]) == ("oom", 137)
    assert w.failure["pod"] == f"{w.name}-node-0"


def test_a_successful_run_has_no_failure(cast, quota, sandbox, kube):
    w = lifecycle.request_workload(
        cast.alice, cast.vision, training(annotations={"sandbox.local/duration-seconds": "60"})
    )
    assert lifecycle.submit(w.pk, kube)
    converge(sandbox, kube)
    sandbox.advance(90)
    converge(sandbox, kube)
    w.refresh_from_db()
    assert (w.state, w.failure) == (State.SUCCEEDED, {})


def test_the_api_shows_the_failure_and_null_when_there_is_none(cast, quota, sandbox, kube, api):
    w = run_until_done(cast, sandbox, kube, "oom")
    api.force_authenticate(cast.alice)
    body = api.get(f"/api/v1/workloads/{w.pk}/").json()
    assert body["state"] == "failed"
    assert body["failure"] == {
        "class": "oom",
        "exit_code": 137,
        "pod": w.failure["pod"],
        "node": w.failure["node"],
        "container": "node",
        "reason": "OOMKilled",
        "message": "",
    }
    listed = {x["id"]: x for x in api.get("/api/v1/workloads/").json()["results"]}
    assert listed[w.pk]["failure"]["class"] == "oom"
    ok = lifecycle.request_workload(cast.alice, cast.vision, training(name="fine"))
    assert api.get(f"/api/v1/workloads/{ok.pk}/").json()["failure"] is None


def test_the_workload_page_shows_the_failure_class_exit_code_pod_and_node(cast, quota, sandbox, kube, client):
    w = run_until_done(cast, sandbox, kube, "preempted")
    client.force_login(cast.alice)
    page = client.get(f"/workloads/{w.pk}/").content.decode()
    assert "Preempted" in page and "<code>PreemptionByScheduler</code>" in page
    assert "<code>143</code>" in page
    assert w.failure["pod"] in page and w.failure["node"] in page
    assert "volcano: preempting to accommodate a higher priority pod" in page


def test_another_teams_member_cannot_read_the_failure(cast, quota, sandbox, kube, api):
    w = run_until_done(cast, sandbox, kube, "error")
    api.force_authenticate(cast.bob)  # nlp only
    assert api.get(f"/api/v1/workloads/{w.pk}/").status_code == 404
