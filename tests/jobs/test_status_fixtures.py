"""Status derivation on the status shapes the upstream controllers really write.

The objects are in ``tests/fixtures/upstream/<kind>/`` (see its README for the sources);
where the upstream CRD is at hand they are validated against it first, so a fixture
cannot drift into a shape no controller writes.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from jobs.kube.status import Failure, derive, failure_of
from tests.kube_schemas import requires_reference, validate_core, validate_custom

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "upstream"


def load(kind: str, name: str) -> dict[str, Any]:
    obj = json.loads((FIXTURES / kind / f"{name}.json").read_text())
    assert obj.pop("_source"), f"{kind}/{name}.json must say where its shape comes from"
    return obj


def every_fixture() -> list[tuple[str, str]]:
    return sorted((p.parent.name, p.stem) for p in FIXTURES.glob("*/*.json"))


CUSTOM = [f for f in every_fixture() if f[0] in ("trainjob", "volcano", "notebook")]


@requires_reference
@pytest.mark.parametrize(("kind", "name"), CUSTOM, ids=["/".join(f) for f in CUSTOM])
def test_each_custom_resource_fixture_fits_its_upstream_crd_status_included(kind, name):
    validate_custom(load(kind, name))


@pytest.mark.parametrize("name", [n for k, n in every_fixture() if k == "pod"])
def test_each_pod_fixture_is_a_valid_core_pod(name):
    pod = load("pod", name)
    # kubernetes-validate's schemas do not accept the kubelet's null lastProbeTime.
    for cond in pod["status"]["conditions"]:
        cond.pop("lastProbeTime", None)
    validate_core(pod)


def pods(*names: str) -> list[dict[str, Any]]:
    return [load("pod", n) for n in names]


# -- phases --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "name", "phase", "message"),
    [
        ("trainjob", "suspended", "pending", "Waiting in the queue (suspended until admitted)."),
        ("trainjob", "complete", "succeeded", "jobset completed successfully"),
        ("trainjob", "failed", "failed", "jobset failed due to one or more job failures"),
        ("jobset", "suspended", "pending", "Waiting in the queue (suspended until admitted)."),
        ("jobset", "completed", "succeeded", "jobset completed successfully"),
        ("jobset", "failed", "failed", "jobset failed due to one or more job failures"),
        ("volcano", "pending", "pending", "Volcano job is pending."),
        ("volcano", "running", "running", "All 2 pods are running."),
        ("volcano", "completed", "succeeded", "Volcano job completed."),
        ("volcano", "terminated", "failed", "Volcano job terminated."),
        ("volcano", "failed-after-retries", "failed", "Volcano job failed."),
        ("notebook", "running", "running", "Notebook is running."),
        ("notebook", "stopped", "stopped", ""),
    ],
)
def test_the_phase_and_message_come_from_the_controllers_own_status(kind, name, phase, message):
    main = load(kind, name)
    seen = derive(main["kind"], main, [], expected_pods=2)
    assert (seen.phase, seen.message) == (phase, message)


def test_a_resumed_trainjob_runs_once_its_nodes_run():
    main = load("trainjob", "running")
    running = copy.deepcopy(load("pod", "succeeded"))
    running["status"]["phase"] = "Running"
    assert derive("TrainJob", main, [running], expected_pods=2).phase == "pending"
    assert derive("TrainJob", main, [running, running], expected_pods=2).phase == "running"


def test_a_resumed_jobset_without_running_pods_is_still_pending():
    assert derive("JobSet", load("jobset", "running"), [], expected_pods=2).phase == "pending"


def test_a_notebook_whose_image_cannot_be_pulled_says_so_even_without_its_pod():
    seen = derive("Notebook", load("notebook", "image-pull-backoff"), [])
    assert seen.phase == "pending"
    assert seen.message == 'ImagePullBackOff: Back-off pulling image "quay.io/jupyter/pytorch-notebook:cuda99"'


# -- why a run failed ------------------------------------------------------------------------


def test_an_oom_killed_container_is_an_oom_failure_with_its_exit_code_pod_and_node():
    assert failure_of(pods("oomkilled")) == Failure(
        "oom", "finetune-node-0-1-x7k2p", "gpu-h100-03", "node", 137, "OOMKilled", ""
    )


def test_a_non_zero_exit_is_an_error_with_the_containers_termination_message():
    failure = failure_of(pods("error"))
    assert (failure.failure_class, failure.exit_code, failure.reason) == ("error", 1, "Error")
    assert failure.message == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert (failure.pod, failure.node) == ("finetune-node-0-0-q9z4m", "gpu-h100-01")


def test_a_pod_with_the_disruption_target_condition_was_preempted_whatever_its_exit_code():
    failure = failure_of(pods("preempted"))
    assert failure.failure_class == "preempted"
    assert (failure.reason, failure.exit_code) == ("PreemptionByScheduler", 143)
    assert failure.message == "volcano: preempting to accommodate a higher priority pod"


def test_an_oom_in_an_earlier_run_of_a_restarting_container_counts():
    failure = failure_of(pods("crashloop-after-oom"))
    assert (failure.failure_class, failure.exit_code, failure.pod) == ("oom", 137, "allreduce-worker-0-0-m2c7d")


def test_the_pod_that_failed_first_is_the_cause():
    # The error pod ended at 09:47:13 like the OOM pod; the preempted one was marked at 09:47:13 too.
    # Same second: preemption explains the rest, then OOM, then a plain error.
    assert failure_of(pods("error", "oomkilled", "preempted")).failure_class == "preempted"
    assert failure_of(pods("error", "oomkilled")).failure_class == "oom"
    later = load("pod", "oomkilled")
    later["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = "2026-03-02T09:50:00Z"
    assert failure_of([later, *pods("error")]).failure_class == "error"


def test_succeeded_pods_and_no_pods_explain_nothing():
    assert failure_of(pods("succeeded")) is None
    assert failure_of([]) is None


@pytest.mark.parametrize(("kind", "name"), [("trainjob", "failed"), ("jobset", "failed"), ("volcano", "terminated")])
def test_a_failed_training_run_carries_the_failure_of_its_pods(kind, name):
    main = load(kind, name)
    seen = derive(main["kind"], main, pods("succeeded", "oomkilled"), expected_pods=2)
    assert seen.phase == "failed"
    assert seen.failure is not None and seen.failure.as_dict() == {
        "class": "oom",
        "pod": "finetune-node-0-1-x7k2p",
        "node": "gpu-h100-03",
        "container": "node",
        "exit_code": 137,
        "reason": "OOMKilled",
        "message": "",
    }
    assert (
        seen.failure.summary()
        == "Pod finetune-node-0-1-x7k2p on node gpu-h100-03 ran out of memory (OOMKilled, exit code 137)."
    )


def test_a_run_that_did_not_fail_has_no_failure_even_with_a_failed_pod():
    main = load("trainjob", "complete")
    assert derive("TrainJob", main, pods("oomkilled")).failure is None
