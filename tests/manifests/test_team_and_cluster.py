"""Team-level objects (namespace, queue, quotas, service account, network policy) and the
cluster-scoped objects an admin installs once (priority classes, training runtimes)."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from fractions import Fraction

import pytest
import yaml

from jobs.kube.manifests import (
    cluster_objects,
    cluster_training_runtime,
    cluster_training_runtimes,
    dra_quota_key,
    format_quantity,
    priority_classes,
    team_objects,
    workload_objects,
)
from jobs.kube.names import PRIORITY_CLASSES, PRIORITY_GUARANTEED, PRIORITY_PREEMPTIBLE
from tests.kube_schemas import REFERENCE, requires_reference, validate_any, validate_core
from tests.manifests.conftest import OFFERINGS, TEAM, spec
from tests.manifests.pods import pods_of
from tests.manifests.pss import assert_restricted

QUOTA = {
    "nvidia.com/gpu": (4, 8),
    "nvidia.com/mig-1g.10gb": (0, 7),
    dra_quota_key("gpu.nvidia.com"): (2, 4),
    "cpu": (Fraction(33, 2), 64),
    "memory": (256 * 2**30, 512 * 2**30),
}
TEAM_LABELS = {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/team": "vision"}


def by_kind(objects):
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def test_team_objects_come_in_apply_order():
    kinds = [(o["kind"], o["metadata"]["name"]) for o in team_objects(TEAM, QUOTA)]
    assert kinds == [
        ("Namespace", "team-vision"),
        ("Queue", "team-vision"),
        ("ResourceQuota", "gpu-quota"),
        ("ResourceQuota", "gpu-quota-guaranteed"),
        ("ServiceAccount", "gpu-portal-workload"),
        ("NetworkPolicy", "gpu-portal-default"),
    ]


@requires_reference
def test_team_objects_fit_their_schemas():
    for obj in team_objects(TEAM, QUOTA):
        validate_any(obj)


def test_team_core_objects_pass_strict_kubernetes_validation():
    for obj in team_objects(TEAM, QUOTA):
        if obj["kind"] != "Queue":
            validate_core(obj)


def test_every_team_object_carries_the_managed_by_and_team_labels():
    for obj in team_objects(TEAM, QUOTA):
        assert obj["metadata"]["labels"].items() >= TEAM_LABELS.items()


def test_the_namespace_enforces_the_restricted_pod_security_standard():
    ns = by_kind(team_objects(TEAM, QUOTA))[("Namespace", "team-vision")]
    labels = ns["metadata"]["labels"]
    for mode in ("enforce", "audit", "warn"):
        assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted"
        assert labels[f"pod-security.kubernetes.io/{mode}-version"] == "latest"


def test_the_queue_deserves_the_guaranteed_share_and_caps_at_the_limit():
    queue = by_kind(team_objects(TEAM, QUOTA))[("Queue", "team-vision")]
    assert queue["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert "namespace" not in queue["metadata"]  # queues are cluster-scoped
    # Only fields Volcano's capacity plugin reads: no weight (proportion's), no guarantee
    # (capacity would hold it idle for the team instead of lending it).
    assert queue["spec"] == {
        "reclaimable": True,
        "capability": {"nvidia.com/gpu": "8", "nvidia.com/mig-1g.10gb": "7", "cpu": "64", "memory": "549755813888"},
        "deserved": {"nvidia.com/gpu": "4", "nvidia.com/mig-1g.10gb": "0", "cpu": "16500m", "memory": "274877906944"},
    }


def test_the_quota_counts_extended_resources_as_requests_and_dra_devices_by_class():
    objects = by_kind(team_objects(TEAM, QUOTA))
    assert objects[("ResourceQuota", "gpu-quota")]["spec"] == {
        "hard": {
            "requests.nvidia.com/gpu": "8",
            "requests.nvidia.com/mig-1g.10gb": "7",
            "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "4",
            "requests.cpu": "64",
            "requests.memory": "549755813888",
        }
    }
    scoped = objects[("ResourceQuota", "gpu-quota-guaranteed")]["spec"]
    assert scoped["hard"]["requests.nvidia.com/gpu"] == "4"
    assert scoped["scopeSelector"] == {
        "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["gpu-portal-guaranteed"]}]
    }


def test_the_workload_service_account_gets_no_api_token():
    sa = by_kind(team_objects(TEAM, QUOTA))[("ServiceAccount", "gpu-portal-workload")]
    assert sa["automountServiceAccountToken"] is False
    assert sa["metadata"]["namespace"] == "team-vision"


def test_the_network_policy_blocks_the_metadata_service_and_admits_only_the_team_and_ingress():
    policy = by_kind(team_objects(TEAM, QUOTA, ingress_namespaces=("istio-system",)))[
        ("NetworkPolicy", "gpu-portal-default")
    ]
    assert policy["spec"] == {
        "podSelector": {},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [
            {"from": [{"podSelector": {}}]},
            {
                "from": [
                    {
                        "namespaceSelector": {
                            "matchExpressions": [
                                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["istio-system"]}
                            ]
                        }
                    }
                ]
            },
        ],
        "egress": [
            {
                "to": [
                    {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.169.254/32"]}},
                    {"ipBlock": {"cidr": "::/0", "except": ["fd00:ec2::254/128"]}},
                ]
            },
            {"to": [{"namespaceSelector": {}}]},
        ],
    }


def test_a_team_without_quota_gets_no_resource_quota():
    kinds = [o["kind"] for o in team_objects(TEAM, {})]
    assert kinds == ["Namespace", "Queue", "ServiceAccount", "NetworkPolicy"]


@pytest.mark.parametrize(
    ("value", "resource", "text"),
    [
        (8, "nvidia.com/gpu", "8"),
        (Fraction(1, 2), "cpu", "500m"),
        (Fraction(1, 3), "cpu", "334m"),
        (Decimal("2.5"), "cpu", "2500m"),
        (Fraction(4, 2), "nvidia.com/gpu", "2"),
        (0, "memory", "0"),
    ],
)
def test_quota_amounts_become_kubernetes_quantities(value, resource, text):
    assert format_quantity(value, resource) == text


@pytest.mark.parametrize(
    ("value", "error"), [(Fraction(1, 2), ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError)]
)
def test_fractions_of_extended_resources_and_negative_quotas_are_refused(value, error):
    with pytest.raises(error):
        format_quantity(value, "nvidia.com/gpu")


# -- cluster-scoped ----------------------------------------------------------------------------


def test_the_portal_uses_a_guaranteed_and_a_preemptible_priority_class():
    assert PRIORITY_CLASSES == (PRIORITY_GUARANTEED, PRIORITY_PREEMPTIBLE)
    assert priority_classes() == [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "gpu-portal-guaranteed", "labels": {"app.kubernetes.io/managed-by": "gpu-portal"}},
            "value": 1000,
            "globalDefault": False,
            "preemptionPolicy": "PreemptLowerPriority",
            "description": "GPU portal: within the team's guaranteed quota; may preempt borrowed capacity.",
        },
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "gpu-portal-preemptible", "labels": {"app.kubernetes.io/managed-by": "gpu-portal"}},
            "value": 100,
            "globalDefault": False,
            "preemptionPolicy": "Never",
            "description": "GPU portal: borrowed capacity above the team's guarantee; preemptible, never preempts.",
        },
    ]
    for pc in priority_classes():
        validate_core(pc)


def test_there_is_one_torch_runtime_per_priority_class():
    runtimes = cluster_training_runtimes()
    assert [r["metadata"]["name"] for r in runtimes] == [
        "gpu-portal-torch-distributed-guaranteed",
        "gpu-portal-torch-distributed-preemptible",
    ]
    for runtime, priority in zip(runtimes, PRIORITY_CLASSES, strict=True):
        (job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
        assert job["template"]["spec"]["template"]["spec"]["priorityClassName"] == priority


@requires_reference
def test_cluster_objects_fit_their_schemas():
    for obj in cluster_objects():
        validate_any(obj)


def test_the_runtime_pod_meets_the_restricted_standard():
    for runtime in cluster_training_runtimes():
        (pod,) = pods_of(runtime)
        assert_restricted(pod.spec)
        validate_core(pod.as_object())


@requires_reference
def test_the_runtime_has_the_shape_of_upstreams_volcano_example():
    """Trainer's own Volcano example: torch mlPolicy, podGroupPolicy.volcano, one job 'node'."""
    example = REFERENCE / "kubeflow-trainer/examples/clustertrainingruntime-and-trainjob-volcano.yaml"
    upstream = next(d for d in yaml.safe_load_all(example.read_text()) if d["kind"] == "ClusterTrainingRuntime")
    ours = cluster_training_runtime(PRIORITY_GUARANTEED)
    assert ours["spec"]["mlPolicy"] == upstream["spec"]["mlPolicy"]
    assert ours["spec"]["podGroupPolicy"] == upstream["spec"]["podGroupPolicy"]
    (theirs,) = upstream["spec"]["template"]["spec"]["replicatedJobs"]
    (mine,) = ours["spec"]["template"]["spec"]["replicatedJobs"]
    assert mine["name"] == theirs["name"] == "node"
    assert mine["template"]["metadata"] == theirs["template"]["metadata"]
    assert [c["name"] for c in mine["template"]["spec"]["template"]["spec"]["containers"]] == ["node"]
    assert ours["metadata"]["labels"]["trainer.kubeflow.org/framework"] == "torch"


@requires_reference
def test_dra_offerings_name_device_classes_the_nvidia_driver_installs():
    classes = {
        d["metadata"]["name"]
        for d in yaml.safe_load_all((REFERENCE / "nvidia-dra-driver-gpu/deviceclasses.yaml").read_text())
        if d and d["kind"] == "DeviceClass"
    }
    for offering in OFFERINGS.values():
        if offering.request_mode == "dra":
            (template, *_) = workload_objects(spec("notebook", offering=offering.slug))
            assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] in classes


def test_every_trainjob_names_a_runtime_the_portal_installs():
    names = {r["metadata"]["name"] for r in cluster_training_runtimes()}
    for priority in PRIORITY_CLASSES:
        (job,) = workload_objects(replace(spec("training"), priority_class=priority))
        assert job["spec"]["runtimeRef"]["name"] in names
