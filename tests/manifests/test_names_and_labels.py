"""Deterministic names, the portal's label set and the selectors the cluster client uses."""

from __future__ import annotations

import re

import pytest

from jobs.kube import labels as L
from jobs.kube.names import (
    dns_label,
    gpu_claim_template_name,
    team_queue_name,
    torch_runtime_name,
    workload_name,
    workspace_pvc_name,
)

RFC1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def test_derived_names_append_a_suffix_to_the_workload_name():
    assert workload_name("explore") == "explore"
    assert gpu_claim_template_name("explore") == "explore-gpu"
    assert workspace_pvc_name("explore") == "explore-workspace"
    assert team_queue_name("vision") == "team-vision"
    assert torch_runtime_name("gpu-portal-guaranteed") == "gpu-portal-torch-distributed-guaranteed"


def test_a_name_that_is_too_long_is_trimmed_and_hashed_the_same_way_every_time():
    long = "a" * 70
    name = dns_label(long, "workspace")
    assert len(name) == 63 and RFC1035.fullmatch(name)
    assert name == dns_label(long, "workspace")
    assert name != dns_label("a" * 71, "workspace")
    assert name.startswith("a" * 54 + "-")


def test_names_are_made_dns_safe_and_start_with_a_letter():
    assert dns_label("My_Notebook") == "my-notebook"
    assert dns_label("42", "gpu") == "x-42-gpu"
    assert dns_label("--") == "x"


def test_workload_labels_identify_the_team_the_workload_and_its_kind():
    assert L.workload_labels("vision", 42, "training") == {
        "app.kubernetes.io/managed-by": "gpu-portal",
        "gpu-portal.io/team": "vision",
        "gpu-portal.io/workload-id": "42",
        "gpu-portal.io/kind": "training",
    }
    assert L.team_labels("vision") == {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/team": "vision"}
    assert L.PORTAL_LABEL_PREFIX == "gpu-portal.io/"


def test_selectors_are_label_selector_strings_for_the_cluster_client():
    assert L.managed_selector() == "app.kubernetes.io/managed-by=gpu-portal"
    assert L.workload_selector(42) == "app.kubernetes.io/managed-by=gpu-portal,gpu-portal.io/workload-id=42"
    assert L.team_selector("vision") == "app.kubernetes.io/managed-by=gpu-portal,gpu-portal.io/team=vision"


def test_the_portals_labels_win_over_a_users():
    merged = L.merge_labels({"gpu-portal.io/team": "mallory", "project": "x"}, L.team_labels("vision"))
    assert merged["gpu-portal.io/team"] == "vision"
    assert merged["project"] == "x"


@pytest.mark.parametrize(
    ("key", "reserved"),
    [
        ("gpu-portal.io/team", True),
        ("sub.gpu-portal.io/x", True),
        ("app.kubernetes.io/name", True),
        ("kubernetes.io/hostname", True),
        ("jobset.sigs.k8s.io/jobset-name", True),
        ("kueue.x-k8s.io/queue-name", True),
        ("scheduling.volcano.sh/queue-name", True),
        ("volcano.sh/preemptable", True),
        ("trainer.kubeflow.org/trainjob-ancestor-step", True),
        ("kubeflow-resource-stopped", True),
        ("example.com/team", False),
        ("notgpu-portal.io/x", False),
        ("project", False),
    ],
)
def test_reserved_keys_are_the_portals_and_the_controllers_domains(key, reserved):
    assert L.is_reserved_key(key) is reserved
